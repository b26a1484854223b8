#!/usr/bin/env bash
# am_bulk_compare.sh -- AM bulk transfers (1 MiB as 64 KiB long messages, RDMA write with
# several in flight) beside the layer below and beside kernel UDP, measured now.
#
#   tools/bench/am_bulk_compare.sh [BUILD_DIR] [--quick]
#
# Ours: am_bench --only bulk (softvia-run --pin, cores 0 and 1, default settings) over shm
# (also with AMVIA_BOUNCE=1: payloads copied through the bounce buffer, not zero copy),
# and over the udp wire on loopback (udp:addr=127.0.0.1,local=wire: the socket even though
# both ends share the host; mtu=auto takes loopback's MTU).
# Beside it: vipl_bench's 64 KiB send stream over shm (what AM stands on: target >= 0.8x),
# and sockperf throughput on loopback with 65,000-byte datagrams (server on core 1, client
# on core 0; its figure is what the sender sent, UDP may drop some at the receiver).
# Target over udp: >= 2000 MiB/s. Rounds back to back; medians of per-round ratios.
# Reports; exit 0 unless something could not run.
set -uo pipefail
build=${1:-build/release}
quick=0; [[ ${2:-} == --quick ]] && quick=1
run="$build/tools/launcher/softvia-run"
am="$build/tools/bench/am_bench"
vipl="$build/tools/bench/vipl_bench"
for f in "$run" "$am" "$vipl"; do [[ -x $f ]] || { echo "am_bulk_compare.sh: $f not built" >&2; exit 2; }; done
work=$(mktemp -d)
trap 'rm -rf "$work"; [[ -n ${srv:-} ]] && kill "$srv" 2>/dev/null' EXIT
csv="$work/bulk.csv"
echo "kind,label,bytes,median_us,p99_us,MBps,msgs_per_s" > "$csv"
. "$(dirname "$0")/bench_common.sh"  # get, ratio, median, rounds
mib=4096 secs=3
((quick)) && { mib=1024; secs=2; }
udp="udp:addr=127.0.0.1,local=wire"

srv=
if command -v sockperf >/dev/null; then
  sp_port=$((20000 + RANDOM % 20000))
  taskset -c 1 timeout $((rounds * (secs + 10) + 60)) sockperf server -i 127.0.0.1 -p "$sp_port" >/dev/null 2>&1 &
  srv=$!
  sleep 1
fi
# sockperf prints MBps as 2^20 bytes/s: MiB/s, as am_bench.
sp() { [[ -n $srv ]] || { echo n/a; return; }
  taskset -c 0 timeout $((secs + 10)) sockperf throughput -i 127.0.0.1 -p "$sp_port" -t "$secs" -m 65000 2>/dev/null |
    awk '/BandWidth is/ {for (i = 1; i <= NF; i++) if ($i == "is") printf "%.1f", $(i+1)}'; }

echo "== in $rounds round(s): am_bench --only bulk (shm, udp on loopback), vipl_bench 64 KiB stream (shm), sockperf throughput (loopback)"
a_shm=() b_shm=() q_b=() v_shm=() a_udp=() s_udp=() q_shm=() q_udp=()
for ((r = 1; r <= rounds; r++)); do
  timeout 300 "$run" -n 2 --pin "$am" --only bulk --bulk-mib "$mib" --csv "$csv" --label shm-$r >/dev/null
  AMVIA_BOUNCE=1 timeout 300 "$run" -n 2 --pin "$am" --only bulk --bulk-mib "$mib" --csv "$csv" --label bounce-$r >/dev/null
  timeout 300 "$run" -n 2 --pin "$vipl" --only bw --sizes 65536 --csv "$csv" --label vipl-$r >/dev/null
  SOFTVIA_DEVICE=$udp timeout 300 "$run" -n 2 --pin "$am" --only bulk --bulk-mib "$mib" --csv "$csv" --label udp-$r >/dev/null
  s=$(sp)
  a=$(get am_bulk shm-$r 1048576 6)
  # vipl_bench's MB/s are 10^6 bytes/s: in MiB/s for the comparison
  v=$(awk -v x="$(get stream vipl-$r 65536 6)" 'BEGIN { if (x != "") printf "%.1f", x / 1.048576 }')
  b=$(get am_bulk bounce-$r 1048576 6)
  u=$(get am_bulk udp-$r 1048576 6)
  echo "round $r: MiB/s shm am $a (bounce $b) vipl $v; udp loopback am $u sockperf $s"
  a_shm+=("$a") b_shm+=("$b") q_b+=("$(ratio "$b" "$v")") v_shm+=("$v") a_udp+=("$u") s_udp+=("$s")
  q_shm+=("$(ratio "$a" "$v")") q_udp+=("$(ratio "$u" "$s")")
done
echo
row() { printf "%-46s %12s %12s %8s   %s\n" "$@"; }
echo "== summary (MiB/s; ratio = ours / beside; medians, each ratio the median of per-round ratios)"
row metric ours beside ratio target
row "AM 1 MiB bulk over shm (vs VIPL 64 KiB stream)" "$(median "${a_shm[@]}")" "$(median "${v_shm[@]}")" "$(median "${q_shm[@]}")" ">= 0.80"
row "same, AMVIA_BOUNCE=1 (no zero copy)" "$(median "${b_shm[@]}")" "$(median "${v_shm[@]}")" "$(median "${q_b[@]}")" "(comparison)"
row "AM 1 MiB bulk over udp, loopback (vs sockperf)" "$(median "${a_udp[@]}")" "$(median "${s_udp[@]}")" "$(median "${q_udp[@]}")" "ours >= 2000 MiB/s"
echo "(sockperf: 65,000-byte datagrams, the sender's figure; the kernel may drop some of them at the receiver)"
