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

. "$(dirname "$0")/bench_common.sh"  # ucx, get, ratio, median, rounds

echo "== in $rounds round(s): am_bench steering, am_bench marshalling, vipl_bench 8 B latency, ucx_perftest"
declare -a sl ml sr mr vl ul ur q_lat_s q_lat_m q_rate_s q_rate_m q_over q_sm_lat q_sm_rate
for ((r = 1; r <= rounds; r++)); do
  timeout 300 "$run" -n 2 --pin "$am" --mode steer --csv "$csv" --label am-steer-$r --iters "$iters" --msgs "$msgs" >/dev/null
  timeout 300 "$run" -n 2 --pin "$am" --mode marshal --csv "$csv" --label am-marshal-$r --iters "$iters" --msgs "$msgs" >/dev/null
  timeout 300 "$run" -n 2 --pin "$vipl" --csv "$csv" --label vipl-$r --iters "$iters" --sizes 8 --only lat >/dev/null
  u_lat=$(ucx ucp_am_lat 8 3); u_rate=$(ucx ucp_am_bw 8 9)
  s_lat=$(get am_lat am-steer-$r 8 4); m_lat=$(get am_lat am-marshal-$r 8 4)
  s_rate=$(get am_rate am-steer-$r 8 7); m_rate=$(get am_rate am-marshal-$r 8 7)
  v_lat=$(get latency vipl-$r 8 4)
  echo "round $r: one-way us steer $s_lat marshal $m_lat vipl $v_lat ucp_am_lat $u_lat;" \
       "msgs/s steer $s_rate marshal $m_rate ucp_am_bw $u_rate"
  sl+=("$s_lat") ml+=("$m_lat") sr+=("$s_rate") mr+=("$m_rate") vl+=("$v_lat") ul+=("$u_lat") ur+=("$u_rate")
  q_lat_s+=("$(ratio "$s_lat" "$u_lat")") q_lat_m+=("$(ratio "$m_lat" "$u_lat")")
  q_rate_s+=("$(ratio "$s_rate" "$u_rate")") q_rate_m+=("$(ratio "$m_rate" "$u_rate")")
  q_over+=("$(awk -v a="$s_lat" -v b="$v_lat" 'BEGIN { if (a != "" && b != "") printf "%.4f", a - b }')")
  q_sm_lat+=("$(ratio "$s_lat" "$m_lat")") q_sm_rate+=("$(ratio "$s_rate" "$m_rate")")
done
echo

row() { printf "%-44s %12s %12s %8s   %s\n" "$1" "$2" "$3" "$4" "$5"; }
steer_lat=$(median "${sl[@]}"); marsh_lat=$(median "${ml[@]}"); vipl_lat=$(median "${vl[@]}")
steer_rate=$(median "${sr[@]}"); marsh_rate=$(median "${mr[@]}")
ucx_lat=$(median "${ul[@]}"); ucx_rate=$(median "${ur[@]}")
echo "== summary (ratio = ours / peer; medians of $rounds round(s), each ratio the median of the per-round ratios)"
row metric ours peer ratio target
row "AM 8 B one-way latency, us (steering)" "$steer_lat" "$ucx_lat" "$(median "${q_lat_s[@]}")" "<= 1.20"
row "AM 8 B one-way latency, us (marshalling)" "$marsh_lat" "$ucx_lat" "$(median "${q_lat_m[@]}")" "<= 1.20"
row "AM short message rate, msgs/s (steering)" "$steer_rate" "$ucx_rate" "$(median "${q_rate_s[@]}")" ">= 0.50 (goal 1.00)"
row "AM short message rate, msgs/s (marshalling)" "$marsh_rate" "$ucx_rate" "$(median "${q_rate_m[@]}")" ">= 0.50"
row "AM cost over raw VIPL one-way, us (steering)" "$(median "${q_over[@]}")" "vipl $vipl_lat" "$(ratio "$steer_lat" "$vipl_lat")" "<= max(0.1 us, 1.10x)"
row "steering vs marshalling latency" "$steer_lat" "$marsh_lat" "$(median "${q_sm_lat[@]}")" "<= 1.00"
row "steering vs marshalling rate" "$steer_rate" "$marsh_rate" "$(median "${q_sm_rate[@]}")" ">= 1.00"
echo "(all figures: $csv)"
