#!/usr/bin/env bash
# udp_compare.sh -- softvia over the udp wire beside kernel UDP (sockperf), measured now,
# between two network namespaces joined by a veth pair.
#
#   tools/bench/udp_compare.sh [BUILD_DIR] [--quick]      (root: creates namespaces)
#
# Ours: vipl_bench through softvia-run --pin (ranks on cores 0 and 1), each rank started
# in its own namespace with `ip netns exec` (SOFTVIA_DEVICE=udp: the NIC binds the veth's
# address, the only up non-loopback one there); the ranks find each other through the
# launcher's job directory, which both namespaces see.
# Peer: sockperf ping-pong --nonblocked (latency) and sockperf throughput (bandwidth),
# server in the second namespace on core 1, client in the first on core 0.
# Prints 8 B one-way latency (median) and 4 KiB streaming bandwidth, ours and sockperf's,
# and the ratios. Reports; does not gate (exit 0 unless something could not run).
set -uo pipefail
build=${1:-build/release}
quick=0; [[ ${2:-} == --quick ]] && quick=1
run="$build/tools/launcher/softvia-run"
bench="$build/tools/bench/vipl_bench"
for f in "$run" "$bench"; do [[ -x $f ]] || { echo "udp_compare.sh: $f not built" >&2; exit 2; }; done
command -v sockperf >/dev/null || { echo "udp_compare.sh: sockperf not installed" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "udp_compare.sh: needs root (network namespaces)" >&2; exit 2; }
run=$(realpath "$run"); bench=$(realpath "$bench")

tag=svu$$
nsa=${tag}a nsb=${tag}b va=${tag}va vb=${tag}vb
ipa=198.18.$(( $$ % 250 )).1 ipb=198.18.$(( $$ % 250 )).2
work=$(mktemp -d)
cleanup() {
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null  # deleting a namespace deletes its end of the veth pair
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
ip netns add "$nsa" && ip netns add "$nsb" &&
  ip link add "$va" type veth peer name "$vb" &&
  ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
  ip -n "$nsa" addr add "$ipa/24" dev "$va" && ip -n "$nsb" addr add "$ipb/24" dev "$vb" &&
  ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
  ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up ||
  { echo "udp_compare.sh: cannot set up the namespaces" >&2; exit 2; }

iters=100000 secs=5
((quick)) && iters=20000 secs=2
csv="$work/bench.csv"
echo "kind,label,bytes,median_us,p99_us,MBps,msgs_per_s" > "$csv"

# Rank r of the launcher's job runs in namespace r (the launcher pins it first).
cat > "$work/in_ns.sh" <<EOS
#!/bin/sh
if [ "\$SOFTVIA_RANK" = 0 ]; then ns=$nsa; else ns=$nsb; fi
exec ip netns exec "\$ns" "\$@"
EOS
chmod +x "$work/in_ns.sh"

dev=${SOFTVIA_UDP_DEVICE:-udp}
echo "== softvia vipl_bench over $dev (veth between namespaces, inline progress, cores 0/1; its header names no device)"
SOFTVIA_DEVICE=$dev timeout 300 "$run" -n 2 --pin "$work/in_ns.sh" "$bench" --csv "$csv" --label udp \
  --iters "$iters" --sizes 8,4096
echo

sp_port=$((20000 + RANDOM % 20000))
ip netns exec "$nsb" taskset -c 1 timeout $((4 * secs + 20)) sockperf server -i "$ipb" -p "$sp_port" --nonblocked \
  >/dev/null 2>&1 &
srv=$!
sleep 1
# sockperf's smallest message is 14 bytes (its own header): the closest to our 8 B.
echo "== sockperf ping-pong --nonblocked, 14 B (its minimum), and throughput, 4 KiB (same veth, cores 0/1)"
sp_lat=$(ip netns exec "$nsa" taskset -c 0 timeout $((secs + 10)) sockperf ping-pong -i "$ipb" -p "$sp_port" \
  -t "$secs" -m 14 --nonblocked 2>/dev/null | awk '/percentile 50.000/ {print $NF}')
sp_bw=$(ip netns exec "$nsa" taskset -c 0 timeout $((secs + 10)) sockperf throughput -i "$ipb" -p "$sp_port" \
  -t "$secs" -m 4096 --nonblocked 2>/dev/null | awk '/BandWidth is/ {for (i = 1; i <= NF; i++) if ($i == "is") print $(i+1)}')
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
echo "sockperf: one-way median ${sp_lat:-n/a} us; throughput ${sp_bw:-n/a} MBps (sender side)"
echo

# What each way of sending and receiving costs by itself (udp_floor.c), same veth, cores 0/1.
floor="$build/tools/bench/udp_floor"
declare -A fl
if [[ -x $floor ]]; then
  echo "== udp_floor: bare ping-pong, 14 B, per way of sending/receiving (no softvia)"
  for m in plain mmsg mixed ring; do
    ip netns exec "$nsb" taskset -c 1 timeout 60 "$floor" "$m" server "$ipb" "$ipa" "$iters" >/dev/null 2>&1 &
    fsrv=$!
    sleep 0.3
    fl[$m]=$(ip netns exec "$nsa" taskset -c 0 timeout 60 "$floor" "$m" client "$ipa" "$ipb" "$iters" 2>&1 |
      awk '/one-way median/ {print $(NF-1)}')
    kill "$fsrv" 2>/dev/null; wait "$fsrv" 2>/dev/null
    echo "$m: ${fl[$m]:-n/a} us"
  done
  echo
fi

get() {  # kind bytes column -> value from our CSV
  awk -F, -v k="$1" -v b="$2" -v c="$3" '$1==k && $3==b {v=$c} END {print v}' "$csv"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
lat=$(get latency 8 4)
bw=$(get stream 4096 6)
row() { printf "%-36s %12s %12s %8s   %s\n" "$@"; }
echo "== summary (ratio = ours / sockperf); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
row metric ours sockperf ratio target
row "8 B (sockperf 14 B) one-way, us, median" "$lat" "${sp_lat:-n/a}" "$(ratio "$lat" "${sp_lat:-}")" "<= 1.30"
row "4 KiB streaming bandwidth, MB/s" "$bw" "${sp_bw:-n/a}" "$(ratio "$bw" "${sp_bw:-}")" "report"
row "floor: io_uring send + multishot recv" "${fl[ring]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[ring]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: io_uring send + recvmmsg" "${fl[mixed]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[mixed]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: sendmsg + recvmmsg" "${fl[mmsg]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[mmsg]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: sendmsg + recv (sockperf's way)" "${fl[plain]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[plain]:-}" "${sp_lat:-}")" "(no softvia)"
echo "(sockperf's MBps is 2^20 bytes/s as it prints it; ours is 10^6 bytes/s)"
