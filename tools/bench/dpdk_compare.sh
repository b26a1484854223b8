#!/usr/bin/env bash
# dpdk_compare.sh -- softvia over the dpdk transport beside its peers, measured now on
# this machine, between two network namespaces joined by a veth pair (net_af_packet).
#
#   tools/bench/dpdk_compare.sh [BUILD_DIR] [--quick]
#
# Latency, 8 B one-way median: vipl_bench ping-pong (unreliable VIs, as UDP is; reliable
#   delivery shown too; inline progress, ranks pinned to cores 0 and 1) beside busy-polled kernel UDP over the same
#   kind of veth pair (sockperf ping-pong --nonblocked, sides pinned to cores 0 and 1).
#   Target: ours at or below kernel UDP's.
# Packet rate: vipl_bench streaming 2 M 8 B messages, steady state (one frame each; RD;
#   inline progress with txbatch=32, a firmware thread per NIC, plain inline) beside dpdk-testpmd
#   with the same PMD and ring settings, txonly in one namespace and rxonly in the
#   other, its forwarding cores pinned to 0 and 1 (the receiver's Rx-pps). Target:
#   ours >= 0.8x testpmd's.
# 4 KiB streaming bandwidth: vipl_bench (RD, inline, txbatch=32) beside sockperf
#   throughput over the same kind of veth pair (kernel UDP; reported, no target).
# Needs root (namespaces, raw sockets), dpdk-testpmd (Debian package dpdk-dev) and
# sockperf. Prints one table; exit status 0 even when a target is missed: this reports,
# it does not gate.
set -uo pipefail
build=${1:-build/release}
quick=0; [[ ${2:-} == --quick ]] && quick=1
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
run="$build/tools/launcher/softvia-run"
bench="$build/tools/bench/vipl_bench"
pair="$src/tests/dpdk/run_pair.sh"
for f in "$run" "$bench" "$pair"; do [[ -x $f ]] || { echo "dpdk_compare.sh: $f not found or not built" >&2; exit 2; }; done
[[ $(id -u) -eq 0 ]] || { echo "dpdk_compare.sh: needs root (network namespaces)" >&2; exit 2; }
iters=20000; secs=10
((quick)) && { iters=5000; secs=5; }
ring="qdisc_bypass=1,framecnt=4096"

id=$$
nsa=svbpa$id nsb=svbpb$id va=svba$id vb=svbb$id
cleanup() { ip netns del "$nsa" 2>/dev/null; ip netns del "$nsb" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM
veth() {  # a fresh pair for each peer measurement
  cleanup
  ip netns add "$nsa" && ip netns add "$nsb" && ip link add "$va" type veth peer name "$vb" &&
    ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
    ip -n "$nsa" addr add 198.18.203.1/24 dev "$va" && ip -n "$nsb" addr add 198.18.203.2/24 dev "$vb" &&
    ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up
}

echo "== softvia vipl_bench over dpdk (net_af_packet, veth between two namespaces), inline progress"
# Unreliable VIs are what UDP is; reliable delivery acknowledges each message, in a ping-
# pong on the reply (the ACK waits up to 20 us for it), shown for comparison.
for rel in U RD; do
  out=$(timeout 300 "$pair" "$run" af_packet --pin --timeout 280 -- "$bench" --reliability $rel --iters "$iters" \
          --sizes 8 --only lat 2>&1)
  echo "reliability=$rel: $(echo "$out" | grep -E "^latency")"
  lat=$(echo "$out" | awk '$1 == "latency" && $2 == 8 {print $3}' | head -1)
  if [[ $rel == U ]]; then our_lat=$lat; else our_lat_rd=$lat; fi
done
# The packet rate three ways. Inline progress with txbatch=32 (a post's frames wait for a
# batch of 32 or the program's next poll: one af_packet send call per burst, as
# testpmd's bursts of 32) is the one set against testpmd, in rounds with it (below). A
# firmware thread per NIC drains every posted send in one step (bursts too, but two
# busy threads per core here). Plain inline progress sends at every post: one send
# system call per frame.
# Steady state, as testpmd's per-second figures are: 2 M messages, 1 M with --quick (3-4 s
# here; a run of 200,000 spends a third of its time warming up, and reads 15-20% lower).
rate_msgs=$((quick ? 1000000 : 2000000))
our_rate_at() {  # progress, txbatch option -> frames/s
  SV_DPDK_OPTS=$2 timeout 300 "$pair" "$run" af_packet --pin --timeout 280 -- "$bench" --reliability RD \
    --progress "$1" --msgs "$rate_msgs" --sizes 8 --only bw 2>&1 | awk '$1 == "stream" && $2 == 8 {print $4}' | head -1
}
our_rate_thread=$(our_rate_at thread ""); echo "thread: $our_rate_thread frames/s"
our_rate_inline=$(our_rate_at inline ""); echo "inline: $our_rate_inline frames/s"
out=$(SV_DPDK_OPTS=txbatch=32 timeout 300 "$pair" "$run" af_packet --pin --timeout 280 -- "$bench" --reliability RD \
        --iters "$iters" --sizes 4096 --only bw 2>&1)
echo "4 KiB, txbatch: $(echo "$out" | grep -E "^stream")"
our_bw=$(echo "$out" | awk '$1 == "stream" && $2 == 4096 {print $3}' | head -1)

echo
echo "== kernel UDP over the same kind of veth pair (sockperf ping-pong --nonblocked, 14 B)"
udp_lat="" udp_bw=""
if command -v sockperf >/dev/null && veth; then
  ip netns exec "$nsb" taskset -c 1 timeout $((secs + 10)) sockperf server -i 198.18.203.2 -p 11111 --nonblocked \
    >/dev/null 2>&1 &
  sleep 1
  udp_lat=$(ip netns exec "$nsa" taskset -c 0 timeout $((secs + 5)) sockperf ping-pong -i 198.18.203.2 -p 11111 \
              -t "$secs" -m 14 --nonblocked 2>/dev/null | awk '/percentile 50.000/ {print $NF}')
  wait
  echo "one-way median us: ${udp_lat:-n/a}"
  ip netns exec "$nsb" taskset -c 1 timeout $((secs + 10)) sockperf server -i 198.18.203.2 -p 11112 --nonblocked \
    >/dev/null 2>&1 &
  sleep 1
  # sockperf prints MBps as 2^20 bytes/s; converted to 10^6 bytes/s, as ours.
  udp_bw=$(ip netns exec "$nsa" taskset -c 0 timeout $((secs + 5)) sockperf throughput -i 198.18.203.2 -p 11112 \
             -t "$secs" -m 4096 --nonblocked 2>/dev/null |
           awk '/BandWidth is/ {for (i = 1; i <= NF; i++) if ($i == "is") printf "%.1f", $(i+1) * 1.048576}')
  wait
  echo "4 KiB throughput MB/s (sender side): ${udp_bw:-n/a}"
else
  echo "sockperf not installed (apt-get install sockperf)"
fi

echo
tpmd_rate_now() {  # -> testpmd's receive rate (median of its per-second figures), or nothing
  command -v dpdk-testpmd >/dev/null && veth || return
  local eal="--no-huge -m 512 --no-shconf --no-pci --no-telemetry --log-level=error" rx
  ip netns exec "$nsa" timeout -s INT $((secs + 6)) dpdk-testpmd --lcores=0@1,1@0 $eal --file-prefix=svtx$id \
    --vdev="net_af_packet0,iface=$va,$ring" -- --total-num-mbufs=16384 --forward-mode=txonly --txpkts=64 \
    --tx-first --stats-period 1 >/dev/null 2>&1 &
  sleep 1
  rx=$(ip netns exec "$nsb" timeout -s INT $((secs + 3)) dpdk-testpmd --lcores=0@0,1@1 $eal --file-prefix=svrx$id \
         --vdev="net_af_packet1,iface=$vb,$ring" -- --total-num-mbufs=16384 --forward-mode=rxonly \
         --stats-period 1 2>/dev/null)
  wait
  rmdir /var/run/dpdk/svtx$id /var/run/dpdk/svrx$id 2>/dev/null
  echo "$rx" | awk '/Rx-pps:/ && $2 > 0 {print $2}' | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'
}
. "$here/bench_common.sh"  # median, rounds (3 here, 1 with --quick)
rounds=$((quick ? 1 : 3))
echo "== frame rate in $rounds round(s): ours (inline, txbatch=32) and dpdk-testpmd txonly -> rxonly, net_af_packet"
echo "   with the same ring settings, 64 B frames, back to back"
command -v dpdk-testpmd >/dev/null || echo "dpdk-testpmd not installed (apt-get install dpdk-dev)"
r_ours=() r_tpmd=() r_q=()
for ((r = 1; r <= rounds; r++)); do
  o=$(our_rate_at inline txbatch=32); t=$(tpmd_rate_now)
  echo "round $r: ours $o frames/s, testpmd ${t:-n/a} Rx-pps"
  r_ours+=("$o") r_tpmd+=("$t") r_q+=("$(ratio "$o" "$t")")
done
our_rate=$(median "${r_ours[@]}"); tpmd_rate=$(median "${r_tpmd[@]}")

echo
printf "%-34s %12s %12s %8s  %s\n" metric ours peer ratio target
printf "%-34s %12s %12s %8s  %s\n" "8 B one-way latency us, U" "${our_lat:-n/a}" "${udp_lat:-n/a}" \
  "$(ratio "$our_lat" "$udp_lat")" "ours/kernel UDP <= 1.00"
printf "%-34s %12s %12s %8s  %s\n" "8 B one-way latency us, RD" "${our_lat_rd:-n/a}" "${udp_lat:-n/a}" \
  "$(ratio "$our_lat_rd" "$udp_lat")" "ours/kernel UDP <= 1.00"
printf "%-34s %12s %12s %8s  %s\n" "packet rate, frames/s (8 B, txbatch)" "${our_rate:-n/a}" "${tpmd_rate:-n/a}" \
  "$(median "${r_q[@]}")" "ours/testpmd >= 0.80 (median of rounds)"
printf "%-34s %12s %12s %8s  %s\n" "packet rate, frames/s (8 B, thread)" "${our_rate_thread:-n/a}" "${tpmd_rate:-n/a}" \
  "$(ratio "$our_rate_thread" "$tpmd_rate")" "(two busy threads per core)"
printf "%-34s %12s %12s %8s  %s\n" "packet rate, frames/s (8 B, inline)" "${our_rate_inline:-n/a}" "${tpmd_rate:-n/a}" \
  "$(ratio "$our_rate_inline" "$tpmd_rate")" "(one frame per VIPL call)"
printf "%-34s %12s %12s %8s  %s\n" "4 KiB stream MB/s (txbatch; UDP)" "${our_bw:-n/a}" "${udp_bw:-n/a}" \
  "$(ratio "$our_bw" "$udp_bw")" "report (sockperf: sender side)"
echo "(load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; other work on this machine slows both sides)"
