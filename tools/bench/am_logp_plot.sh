#!/usr/bin/env bash
# am_logp_plot.sh -- the LogP signature of softvia's AM layer as a PNG.
#
#   tools/bench/am_logp_plot.sh [BUILD_DIR] [OUT_DIR] [ITERS]
#
# Runs am_bench --only logp in both modes (firmware steering, host marshalling), ranks
# pinned to cores 0 and 1, writes OUT_DIR/am-logp-<mode>.csv (label,delay_ns,burst,
# us_per_msg; the last line holds o_s, o_r, g, L) and plots time per message against
# burst size, one curve per inter-message delay, into OUT_DIR/am-logp.png (gnuplot;
# apt-get install gnuplot-nox). ITERS (default 20000): the latency measurement's round trips.
set -euo pipefail
build=${1:-build/release}
out=${2:-$build}
iters=${3:-20000}
run="$build/tools/launcher/softvia-run"
am="$build/tools/bench/am_bench"
for mode in steer marshal; do
  timeout 300 "$run" -n 2 --pin "$am" --mode "$mode" --only logp --iters "$iters" --logp-csv "$out/am-logp-$mode.csv"
done
command -v gnuplot >/dev/null || { echo "am_logp_plot.sh: gnuplot not installed; CSVs are in $out" >&2; exit 0; }
# one data block per delay (gnuplot 'index'), for each mode
for mode in steer marshal; do
  awk -F, 'NR > 1 && !/^#/ { if ($2 != last && NR > 2) print "\n"; last = $2; print $3, $4, $2 }' \
    "$out/am-logp-$mode.csv" > "$out/am-logp-$mode.dat"
done
gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output "$out/am-logp.png"
set multiplot layout 1,2
set logscale x 2
set xlabel "burst size (messages)"
set ylabel "time per message (us)"
set key top left
do for [m in "steer marshal"] {
  set title sprintf("softvia AM LogP signature (%s)", m)
  f = sprintf("$out/am-logp-%s.dat", m)
  plot for [i=0:6] f index i using 1:2 with linespoints title sprintf("delay %d ns", (i == 0 ? 0 : 100 * 2**(i-1)))
}
unset multiplot
GP
echo "plot: $out/am-logp.png"
grep '^#' "$out"/am-logp-*.csv
