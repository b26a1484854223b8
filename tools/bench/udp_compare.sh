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
. "$(dirname "$0")/bench_common.sh"  # get, ratio, median, rounds
ours() {  # label device, then vipl_bench arguments
  local label=$1 d=$2; shift 2
  SOFTVIA_DEVICE=$d timeout 300 "$run" -n 2 --pin "$work/in_ns.sh" "$bench" --csv "$csv" --label "$label" \
    --iters "$iters" "$@"
}
sp_port=$((20000 + RANDOM % 20000))
# sockperf's server busy-polls its core (--nonblocked) for as long as it runs: it runs only
# while sockperf measures, or it would take core 1 from our rank 1 (earlier versions of
# this script left it running through our runs, which cost ours ~2x in bandwidth).
# sockperf's smallest message is 14 bytes (its own header): the closest to our 8 B.
sp() {
  ip netns exec "$nsb" taskset -c 1 timeout $((secs + 20)) sockperf server -i "$ipb" -p "$sp_port" \
    --nonblocked >/dev/null 2>&1 &
  local srv=$!
  sleep 0.5
  ip netns exec "$nsa" taskset -c 0 timeout $((secs + 10)) sockperf "$@" -i "$ipb" -p "$sp_port" -t "$secs" \
    --nonblocked 2>/dev/null
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
}
echo "== 8 B one-way latency in $rounds round(s): vipl_bench over $dev (veth between namespaces, inline"
echo "   progress, cores 0/1) and sockperf ping-pong --nonblocked, 14 B (its minimum), back to back"
lat_r=() sp_r=() q_r=()
for ((r = 1; r <= rounds; r++)); do
  ours udp-lat-$r "$dev" --sizes 8 --only lat >/dev/null
  l=$(get latency udp-lat-$r 8 4)
  p=$(sp ping-pong -m 14 | awk '/percentile 50.000/ {print $NF}')
  echo "round $r: ours $l us, sockperf $p us"
  lat_r+=("$l") sp_r+=("$p") q_r+=("$(ratio "$l" "$p")")
done
echo
echo "== 4 KiB streams in $rounds round(s): vipl_bench over $dev and sockperf throughput (sender side),"
echo "   back to back; then once with txbatch=32"
bw_r=() spbw_r=() qbw_r=()
for ((r = 1; r <= rounds; r++)); do
  ours udp-bw-$r "$dev" --sizes 4096 --only bw >/dev/null
  b=$(get stream udp-bw-$r 4096 6)
  # sockperf prints MBps as 2^20 bytes/s; converted to 10^6 bytes/s, as ours.
  p=$(sp throughput -m 4096 | awk '/BandWidth is/ {for (i = 1; i <= NF; i++) if ($i == "is") printf "%.1f", $(i+1) * 1.048576}')
  echo "round $r: ours $b MB/s, sockperf ${p:-n/a} MB/s (sender side)"
  bw_r+=("$b") spbw_r+=("$p") qbw_r+=("$(ratio "$b" "$p")")
done
[[ $dev == *:* ]] && batched="$dev,txbatch=32" || batched="$dev:txbatch=32"
ours udp-bw-batch "$batched" --sizes 4096 --only bw >/dev/null
echo

# What each way of sending and receiving costs by itself (udp_floor.c), same veth, cores 0/1.
floor="$build/tools/bench/udp_floor"
declare -A fl
if [[ -x $floor ]]; then
  echo "== udp_floor: bare ping-pong, 14 B, per way of sending/receiving (no softvia)"
  for m in plain mmsg peer conn mixed ring; do
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

lat=$(median "${lat_r[@]}")
sp_lat=$(median "${sp_r[@]}")
bw=$(median "${bw_r[@]}")
sp_bw=$(median "${spbw_r[@]}")
bwb=$(get stream udp-bw-batch 4096 6)
row() { printf "%-36s %12s %12s %8s   %s\n" "$@"; }
echo "== summary (ratio = ours / sockperf); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
row metric ours sockperf ratio target
row "8 B (sockperf 14 B) one-way, us, median" "$lat" "${sp_lat:-n/a}" "$(median "${q_r[@]}")" "<= 1.10 (median of per-round ratios)"
row "4 KiB streaming bandwidth, MB/s" "$bw" "${sp_bw:-n/a}" "$(median "${qbw_r[@]}")" ">= 1.00 (median of per-round ratios)"
row "same, txbatch=32" "$bwb" "${sp_bw:-n/a}" "$(ratio "$bwb" "${sp_bw:-}")" "report"
row "floor: io_uring send + multishot recv" "${fl[ring]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[ring]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: io_uring send + recvmmsg" "${fl[mixed]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[mixed]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: sendmsg + recvmmsg" "${fl[mmsg]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[mmsg]:-}" "${sp_lat:-}")" "(no softvia)"
row "floor: same, connected send socket" "${fl[peer]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[peer]:-}" "${sp_lat:-}")" "(no softvia; txsock=peer's way)"
row "floor: one socket, connected both ways" "${fl[conn]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[conn]:-}" "${sp_lat:-}")" "(no softvia; what a connected receiving socket saves)"
row "floor: sendmsg + recv (sockperf's way)" "${fl[plain]:-n/a}" "${sp_lat:-n/a}" "$(ratio "${fl[plain]:-}" "${sp_lat:-}")" "(no softvia)"
echo "(bandwidths in 10^6 bytes/s; sockperf's throughput is what its sender sent, UDP may drop some)"
