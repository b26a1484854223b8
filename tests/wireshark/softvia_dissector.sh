#!/usr/bin/env bash
# softvia_dissector.sh -- the Wireshark dissector (tools/wireshark/softvia.lua) against
# captures of real runs (docs/wireshark.md, "The test").
#
#   softvia_dissector.sh --source DIR --run SOFTVIA_RUN --vipl-bench PROG --mp-names PROG
#       --am-pingpong PROG --fault-stream PROG --conf-rdma-protection PROG --mp-atomics PROG
#       --conf-atomics PROG [--wires "udp dpdk"] [--keep DIR]
#
# For each wire, six jobs of two ranks on two hosts (softvia-run --hosts 2: network
# namespaces, each with a veth pair to a bridge, addresses in 198.18.0.0/15; nothing
# leaves the machine), each captured by tcpdump on host 0's veth (capture_rank.sh):
#   rdma   vipl_bench --only rdma: peer-to-peer connect, RDMA writes (one frame and
#          several), RDMA reads and their answers, ACKs, sends with immediate data,
#          disconnect
#   names  mp_names: client/server connect (request, no match, accept, reject), sends
#          with known contents, disconnect
#   am     am_pingpong with firmware steering: requests and replies (REPLY flag)
#   fault  fault_stream under the fault injector (loss, duplicates, reordering): the
#          CRC-32C trailer, retransmissions, GAP ACKs, multi-frame messages
#   fadd   mp_atomics --op fadd: NIC fetch-adds (ATOMIC_REQ) and their old values
#          (ATOMIC_RESP), 16 in flight
#   lock   mp_atomics --op lock: a lock taken and released with NIC compare-and-swap
#          around an RDMA read and write of a plain counter
# then, for udp, the rdma job again with the interface's segmentation left on (trains
# captured whole, which the dissector must cut into datagrams), and single-process runs over the loopback of a private network namespace of
# conf_rdma_protection (nak: refused RDMA requests, NAK, which no two-process program
# makes) and of conf_atomics (atomic-nak: both operations, some refused with a NAK).
# check_capture.py decodes each capture with tshark and the dissector and checks every
# field against the bytes and against what the run did. Then: the UDP-port preference
# and the heuristic switch, the fault-trailer preference, and dissectors with one field
# read at a wrong offset, which the checks must refuse.
#
# Exit 0 pass, 1 fail, 77 skip (no tshark with Lua, no tcpdump, no python3, not root).
set -uo pipefail

me=softvia_dissector.sh
skip() { echo "$me: SKIP: $*"; exit 77; }
die() { echo "$me: FAIL: $*" >&2; exit 1; }

src= run= bench= names= am= fault= prot= atomics= conf_atomics= wires="udp dpdk" keep=
while (($#)); do
  (($# >= 2)) || { echo "$me: option '$1' needs a value" >&2; exit 2; }
  case $1 in
    --source) src=$2 ;;
    --run) run=$2 ;;
    --vipl-bench) bench=$2 ;;
    --mp-names) names=$2 ;;
    --am-pingpong) am=$2 ;;
    --fault-stream) fault=$2 ;;
    --conf-rdma-protection) prot=$2 ;;
    --mp-atomics) atomics=$2 ;;
    --conf-atomics) conf_atomics=$2 ;;
    --wires) wires=$2 ;;
    --keep) keep=$2 ;;
    *) echo "usage: see the head of $0" >&2; exit 2 ;;
  esac
  shift 2
done
[[ -n $src && -n $run && -n $bench && -n $names && -n $am && -n $fault && -n $prot && -n $atomics && -n $conf_atomics ]] ||
  { echo "$me: missing arguments (see the head of $0)" >&2; exit 2; }
lua=$src/tools/wireshark/softvia.lua
here=$src/tests/wireshark

# ---- what the machine must have; none of it is ours to install here
command -v tshark >/dev/null || skip "tshark is not installed (Debian: apt-get install tshark)"
tshark -v 2>/dev/null | grep -q "with Lua" || skip "this tshark is built without Lua"
command -v tcpdump >/dev/null || skip "tcpdump is not installed (Debian: apt-get install tcpdump)"
command -v ethtool >/dev/null || skip "ethtool is not installed (Debian: apt-get install ethtool)"
command -v python3 >/dev/null || skip "python3 is not installed"
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces for softvia-run --hosts, packet capture)"
command -v ip >/dev/null || skip "needs iproute2 (ip)"
command -v unshare >/dev/null || skip "needs unshare (util-linux)"
[[ -n ${wires// /} ]] || skip "this build has no network wire (udp, dpdk)"

# ---- the dissector loads (a Lua error is a failure, not a skip)
out=$(tshark -G fields -X lua_script:"$lua" 2>&1) || die "tshark -G fields failed: $out"
grep -q "Lua:" <<<"$out" && die "the dissector does not load: $(grep -A3 'Lua:' <<<"$out")"
grep -q $'\tsoftvia.seq\t' <<<"$out" || die "the dissector registers no field softvia.seq"

if [[ -n $keep ]]; then
  work=$keep
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/softvia-wireshark.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
trap 'exit 130' INT TERM
start=$SECONDS
failed=0

# The environment every job starts from: nothing a caller set may change the runs.
clean_env=(env -u SOFTVIA_HOSTS -u SOFTVIA_FAULTS -u SOFTVIA_RETRY_TIMEOUT_MS -u AMVIA_STEERING
           -u AMVIA_CONNECT_TIMEOUT_MS -u SOFTVIA_RANK -u SOFTVIA_SIZE SOFTVIA_PROGRESS=inline)

# tcpdump's closing lines: every packet captured, none dropped (a frame missing from the
# capture would fail the checks for the wrong reason).
capture_complete() {  # dir
  local err=$1/tcpdump.err
  grep -qx "0 packets dropped by kernel" "$err" || return 1
  local cap rec
  cap=$(sed -n 's/^\([0-9]*\) packets captured$/\1/p' "$err")
  rec=$(sed -n 's/^\([0-9]*\) packets received by filter$/\1/p' "$err")
  [[ -n $cap && $cap -gt 0 ]] || return 1
  # On lo the filter counts each packet twice (out and in); on a veth once.
  [[ $rec == "$cap" || $rec == $((2 * cap)) ]]
}

# job NAME DEVICE FAULTS PROGRAM ARGS...: a two-host job, host 0 captured. Tried twice
# when the capture lost packets (a busy machine).
job() {
  local name=$1 dev=$2 faults=$3
  shift 3
  local d=$work/$name try
  for try in 1 2; do
    rm -rf "$d"
    mkdir -p "$d"
    local t0=$SECONDS
    "${clean_env[@]}" SOFTVIA_DEVICE="$dev" ${faults:+SOFTVIA_FAULTS=$faults} "${extra_env[@]}" \
      "$run" -n 2 --hosts 2 --timeout 60 "$here/capture_rank.sh" "$d" "$@" >"$d/run.log" 2>&1
    local rc=$?
    if ((rc == 77)); then
      cat "$d/run.log"
      skip "softvia-run --hosts cannot run here"
    fi
    if ((rc != 0)); then
      echo "$me: $name: the job failed (exit $rc):"
      tail -30 "$d/run.log"
      return 1
    fi
    if capture_complete "$d"; then
      echo "$me: $name: $(sed -n 's/ packets captured//p' "$d/tcpdump.err") packets captured on host 0's veth in $((SECONDS - t0)) s"
      return 0
    fi
    echo "$me: $name: the capture is incomplete ($([[ $try == 1 ]] && echo again || echo giving up)):"
    cat "$d/tcpdump.err"
  done
  return 1
}

# check NAME WIRE SCENARIO [check_capture.py options...]
check() {
  local name=$1 wire=$2 scenario=$3
  shift 3
  python3 "$here/check_capture.py" --lua "$lua" --capture "$work/$name/capture.pcap" --wire "$wire" \
    --scenario "$scenario" "$@" || failed=1
}

ITERS=10 PINGS=30 PIPE=100 MSGS=100 FADDS=200 LOCKS=100
FAULTS=drop=0.05,dup=0.05,reorder=0.02,corrupt=0,delay=0,seed=7
for wire in $wires; do
  case $wire in
    udp) dev=udp ;;
    # qdisc_bypass=0: frames a packet socket sends past the qdisc never reach a capture
    # on their own interface.
    dpdk) dev='dpdk:vdev=net_af_packet0;iface=%i;qdisc_bypass=0' ;;
    *) die "unknown wire '$wire'" ;;
  esac
  extra_env=()
  job "$wire-rdma" "$dev" "" "$bench" --only rdma --sizes 8,4096 --iters $ITERS &&
    check "$wire-rdma" "$wire" rdma --iters $ITERS || failed=1
  job "$wire-names" "$dev" "" "$names" --progress inline && check "$wire-names" "$wire" names || failed=1
  extra_env=(AMVIA_STEERING=1)
  job "$wire-am" "$dev" "" "$am" --iters $PINGS --pipeline $PIPE &&
    check "$wire-am" "$wire" am --iters $PINGS --messages $PIPE || failed=1
  extra_env=()
  job "$wire-fault" "$dev" "$FAULTS" "$fault" $MSGS RD && check "$wire-fault" "$wire" fault --messages $MSGS || failed=1
  job "$wire-fadd" "$dev" "" "$atomics" --op fadd --iters $FADDS && check "$wire-fadd" "$wire" fadd --iters $FADDS ||
    failed=1
  job "$wire-lock" "$dev" "" "$atomics" --op lock --iters $LOCKS && check "$wire-lock" "$wire" lock --iters $LOCKS ||
    failed=1
done

# ---- NAK: one process, its NIC's VIs connected to each other through its own UDP socket
# over the loopback of a private network namespace (no other traffic there). mtu=1472:
# Ethernet-sized datagrams, as on the veth pairs above (loopback's own MTU, which mtu=auto
# would take, makes 64 KiB datagrams that the capture's 4096-byte snapshot cuts).
# local_job NAME PROGRAM SCENARIO
local_job() {
  local name=$1 prog=$2 scenario=$3 d=$work/$1 try rc
  for try in 1 2; do
    rm -rf "$d"
    mkdir -p "$d"
    unshare -n sh -c 'ip link set lo up && exec "$@"' sh "${clean_env[@]}" \
      SOFTVIA_DEVICE=udp:local=wire,mtu=1472 SOFTVIA_HOST_IFACE=lo "$here/capture_rank.sh" "$d" "$prog" >"$d/run.log" 2>&1
    rc=$?
    if ((rc != 0)); then
      echo "$me: $name: the run failed (exit $rc):"
      tail -20 "$d/run.log"
      failed=1
      return
    fi
    if capture_complete "$d"; then
      echo "$me: $name: $(sed -n 's/ packets captured//p' "$d/tcpdump.err") packets captured on lo"
      check "$name" udp "$scenario"
      return
    fi
    echo "$me: $name: the capture is incomplete ($([[ $try == 1 ]] && echo again || echo giving up)):"
    cat "$d/tcpdump.err"
    ((try == 2)) && failed=1
  done
}
# ---- trains: the udp wire sends a message's datagrams as one train, which a capture on
# the sending veth takes whole (the interface's segmentation left on). The dissector must
# show each train as its datagrams; check_capture.py --trains cuts the capture into
# datagrams itself, checks that capture as every other, and the trains against it.
if [[ " $wires " == *" udp "* ]]; then
  extra_env=(CAPTURE_SEGMENTATION=keep)
  if job udp-train udp "" "$bench" --only rdma --sizes 8,4096 --iters $ITERS; then
    check udp-train udp rdma --iters $ITERS --trains "$work/udp-train/split.pcap"
    # A dissector that does not cut trains must fail that check.
    sed 's/    if not stride then return dissect_datagram/    if true then return dissect_datagram/' "$lua" >"$work/mutant.lua"
    if cmp -s "$lua" "$work/mutant.lua"; then
      echo "$me: the train mutation changed nothing"
      failed=1
    elif python3 "$here/check_capture.py" --lua "$work/mutant.lua" --capture "$work/udp-train/capture.pcap" --wire udp \
           --scenario rdma --iters $ITERS --trains "$work/udp-train/split2.pcap" >"$work/mutant.log" 2>&1 ||
         ! grep -q "trains: [1-9][0-9]* problems" "$work/mutant.log"; then
      echo "$me: a dissector that does not cut trains is not refused:"
      head -5 "$work/mutant.log"
      failed=1
    fi
  else
    failed=1
  fi
  extra_env=()
fi

if [[ " $wires " == *" udp "* ]]; then
  local_job udp-nak "$prot" nak                   # refused RDMA writes and reads
  local_job udp-atomic-nak "$conf_atomics" atomic-nak  # atomics, some refused at the target
fi

# ---- preferences
first=${wires%% *}
if [[ " $wires " == *" udp "* && -s $work/udp-rdma/capture.pcap ]]; then
  cap=$work/udp-rdma/capture.pcap
  # Both hosts' ports: UDP offers a datagram to the lower port's dissector first.
  port=$(tshark -n -r "$cap" -Y "udp" -T fields -e udp.srcport 2>/dev/null | sort -u | paste -sd, -)
  none=$(tshark -n -X lua_script:"$lua" -o softvia.heuristic:FALSE -r "$cap" -Y softvia.wire 2>/dev/null | wc -l)
  if [[ $none != 0 || -z $port ]]; then
    echo "$me: with the heuristic off and no port, $none packets still decoded (ports '$port')"
    failed=1
  elif ! python3 "$here/check_capture.py" --lua "$lua" --capture "$cap" --wire udp --scenario rdma --iters $ITERS \
         --prefs softvia.heuristic:FALSE --prefs "softvia.udp_ports:1-3,$port" >"$work/byport.log"; then
    # The whole check again, every datagram found by the hosts' UDP ports alone.
    echo "$me: decoding by UDP ports $port (preference udp_ports, heuristic off) fails the checks:"
    head -5 "$work/byport.log"
    failed=1
  else
    echo "$me: the heuristic off: nothing decoded; by the hosts' UDP ports $port: everything, as before"
  fi
fi
if [[ -s $work/$first-fault/capture.pcap ]]; then
  # Trailer detection off: every frame then ends in 4 bytes that no field explains.
  read -r frames without < <(tshark -n -X lua_script:"$lua" -o softvia.fault_trailer:never \
    -r "$work/$first-fault/capture.pcap" -T fields -e softvia.type -e softvia.trailing 2>/dev/null |
    awk -F'\t' '$1 != "" { n++; if (length($2) == 8) t++ } END { print n + 0, t + 0 }')
  if [[ $frames -gt 0 && $without == "$frames" ]]; then
    echo "$me: fault_trailer=never: all $frames frames show their 4 CRC-32C bytes as unexplained"
  else
    echo "$me: fault_trailer=never: $without of $frames frames show 4 unexplained bytes"
    failed=1
  fi
fi

# ---- the checks must catch a field read at the wrong offset. Each mutant must fail both
# the comparison with the bytes and the run's checks.
# mutant CAPTURE SCENARIO ITERS SED-SCRIPT
mutant() {
  local name=$1 scenario=$2 iters=$3 mut=$4
  [[ -s $work/$name/capture.pcap ]] || return 0
  sed "$mut" "$lua" >"$work/mutant.lua"
  cmp -s "$lua" "$work/mutant.lua" && { echo "$me: mutation '$mut' changed nothing"; failed=1; return; }
  python3 "$here/check_capture.py" --lua "$work/mutant.lua" --capture "$work/$name/capture.pcap" \
    --wire "$first" --scenario "$scenario" --iters "$iters" >"$work/mutant.log" 2>&1
  if ! grep -q "FAIL (against the bytes: [1-9][0-9]* problems; against the run: [1-9][0-9]* problems)" "$work/mutant.log"; then
    echo "$me: a dissector with '$mut' is not refused by both kinds of check on $name:"
    head -5 "$work/mutant.log"
    failed=1
  fi
}
# The sequence number read from the immediate-data word (offset 24 instead of 28); the
# RDMA address read 4 bytes late.
mutant "$first-rdma" rdma $ITERS 's/tvb(28, 4)/tvb(24, 4)/g'
mutant "$first-rdma" rdma $ITERS 's/xt:add_le(f.rdma_addr, tvb(pos, 8))/xt:add_le(f.rdma_addr, tvb(pos + 4, 8))/'
# Atomics: the old value read from the header's last 8 bytes; the two operands swapped;
# the operation read from the sequence-number word.
mutant "$first-fadd" fadd $FADDS 's/ft:add_le(f.atomic_old, tvb(pos, 8))/ft:add_le(f.atomic_old, tvb(pos - 8, 8))/'
mutant "$first-lock" lock $LOCKS 's/local o0, o1 = tvb(pos, 8), tvb(pos + 8, 8)/local o0, o1 = tvb(pos + 8, 8), tvb(pos, 8)/'
mutant "$first-fadd" fadd $FADDS 's/ht:add_le(f.atomic_op, tvb(24, 4))/ht:add_le(f.atomic_op, tvb(28, 4))/'
echo "$me: dissectors with a field at a wrong offset are refused"

echo "$me: $((SECONDS - start)) s"
if ((failed)); then
  [[ -z $keep ]] && { cp -r "$work" "/tmp/softvia-wireshark-failed.$$" 2>/dev/null && echo "$me: captures kept in /tmp/softvia-wireshark-failed.$$"; }
  echo "$me: FAIL"
  exit 1
fi
echo "$me: PASS"
