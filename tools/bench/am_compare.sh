#!/usr/bin/env bash
# am_compare.sh -- softvia's Active Messages figures beside UCX's, and beside raw VIPL,
# measured now on this machine in one run.
#
#   tools/bench/am_compare.sh [BUILD_DIR] [--quick]
#
# Ours: am_bench (AM-2 over VIPL, shm NIC, inline progress) in both request/reply modes
# (firmware steering, host marshalling) and vipl_bench 8 B latency (the layer below),
# ranks pinned to cores 0 and 1 by softvia-run --pin.
# Peer: ucx_perftest -t ucp_am_lat and -t ucp_am_bw -s 8 over UCX shared memory
# (UCX_TLS=shm,self), pinned the same way.
# Prints one table (metric, ours, peer, ratio, target) and writes am-bench-results.csv in
# BUILD_DIR. Exit status 0 even when a target is missed: this reports; it does not gate.
set -uo pipefail
build=${1:-build/release}
quick=0; [[ ${2:-} == --quick ]] && quick=1
run="$build/tools/launcher/softvia-run"
am="$build/tools/bench/am_bench"
vipl="$build/tools/bench/vipl_bench"
for f in "$run" "$am" "$vipl"; do [[ -x $f ]] || { echo "am_compare.sh: $f not built" >&2; exit 2; }; done
csv="$build/am-bench-results.csv"
echo "kind,label,bytes,median_us,p99_us,MBps,msgs_per_s" > "$csv"
iters=100000; msgs=1000000
((quick)) && { iters=20000; msgs=200000; }

. "$(dirname "$0")/bench_common.sh"  # ucx, get, ratio

echo "== softvia am_bench, firmware steering"
timeout 300 "$run" -n 2 --pin "$am" --mode steer --csv "$csv" --iters "$iters" --msgs "$msgs"
echo "== softvia am_bench, host marshalling"
timeout 300 "$run" -n 2 --pin "$am" --mode marshal --csv "$csv" --iters "$iters" --msgs "$msgs"
echo "== softvia vipl_bench 8 B latency (the layer below AM)"
timeout 300 "$run" -n 2 --pin "$vipl" --csv "$csv" --label vipl --iters "$iters" --sizes 8 --only lat
echo "== ucx_perftest (UCX_TLS=shm,self)"
ucx_lat=$(ucx ucp_am_lat 8 3)
ucx_rate=$(ucx ucp_am_bw 8 9)
echo "ucp_am_lat 8 B one-way median us: $ucx_lat; ucp_am_bw 8 B msgs/s: $ucx_rate"
echo

steer_lat=$(get am_lat am-steer 8 4); marsh_lat=$(get am_lat am-marshal 8 4)
steer_rate=$(get am_rate am-steer 8 7); marsh_rate=$(get am_rate am-marshal 8 7)
vipl_lat=$(get latency vipl 8 4)
row() { printf "%-44s %12s %12s %8s   %s\n" "$1" "$2" "$3" "$4" "$5"; }
diffus() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%.3f", a - b }'; }
echo "== summary (ratio = ours / peer)"
row metric ours peer ratio target
row "AM 8 B one-way latency, us (steering)" "$steer_lat" "$ucx_lat" "$(ratio "$steer_lat" "$ucx_lat")" "<= 2.00"
row "AM 8 B one-way latency, us (marshalling)" "$marsh_lat" "$ucx_lat" "$(ratio "$marsh_lat" "$ucx_lat")" "<= 2.00"
row "AM short message rate, msgs/s (steering)" "$steer_rate" "$ucx_rate" "$(ratio "$steer_rate" "$ucx_rate")" ">= 0.50 (goal 1.00)"
row "AM short message rate, msgs/s (marshalling)" "$marsh_rate" "$ucx_rate" "$(ratio "$marsh_rate" "$ucx_rate")" ">= 0.50"
row "AM cost over raw VIPL one-way, us (steering)" "$(diffus "$steer_lat" "$vipl_lat")" "vipl $vipl_lat" "$(ratio "$steer_lat" "$vipl_lat")" "<= max(0.1 us, 1.10x)"
row "steering vs marshalling latency" "$steer_lat" "$marsh_lat" "$(ratio "$steer_lat" "$marsh_lat")" "<= 1.00"
row "steering vs marshalling rate" "$steer_rate" "$marsh_rate" "$(ratio "$steer_rate" "$marsh_rate")" ">= 1.00"
echo "(all figures: $csv)"
