#!/usr/bin/env bash
# reproduce_plot.sh DIR -- the plots of reproduce.sh's CSVs in DIR (gnuplot, PNG):
#   fig6-1.png   AM and VIPL one-way time and streaming bandwidth by message size
#   rdma.png     via-rel bulk bandwidth, zero copy against copies
#   fig6-5.png   each application's time by process count, one line per back end
# Figure 6-2 comes drawn from am_logp_plot.sh, Figures 6-3 and 6-4 from splitc_compare.sh.
# Medians over rounds ("-<round>" ends each label) go into the *-median.csv beside each plot.
set -euo pipefail
dir=${1:?usage: reproduce_plot.sh DIR}
command -v gnuplot >/dev/null || { echo "reproduce_plot.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }

median_by() {  # csv key-columns value-column: "key,median" lines (labels lose their -<round>)
  awk -F, -v keys="$2" -v val="$3" '
    NR > 1 && $val != "" {
      n = split(keys, k, " "); key = ""
      for (i = 1; i <= n; i++) { f = $k[i]; if (k[i] == 2) sub(/-[0-9]+$/, "", f); key = key (i > 1 ? "," : "") f }
      if (!(key in c)) order[++m] = key
      c[key]++; v[key, c[key]] = $val + 0 }
    END {
      for (j = 1; j <= m; j++) {
        key = order[j]; n = c[key]
        for (a = 1; a <= n; a++) x[a] = v[key, a]
        for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
        print key "," (n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2)
      } }' "$1"
}

# ---- Figure 6-1 -------------------------------------------------------------------------------
{
  echo "bytes,am_one_way_us,vipl_one_way_us,am_MBps,vipl_MBps"
  lat=$(median_by "$dir/fig6-1.csv" "1 2 3" 4)
  bw=$(median_by "$dir/fig6-1.csv" "1 2 3" 6)
  for b in $(awk -F, 'NR > 1 {print $3}' "$dir/fig6-1.csv" | sort -un); do
    pick() { awk -F, -v k="$1" -v b="$b" '$1 == k && $3 == b {print $4}' <<<"$2"; }
    echo "$b,$(pick am_size_lat "$lat"),$(pick latency "$lat"),$(pick am_size_bw "$bw"),$(pick stream "$bw")"
  done
} > "$dir/fig6-1-median.csv"
gnuplot <<EOF
set datafile separator ","
set terminal pngcairo size 1200,500 noenhanced
set output "$dir/fig6-1.png"
set multiplot layout 1,2 title "Figure 6-1: AM over VIPL against VIPL (shm NIC, 2 processes on cores 0 and 1)"
set logscale x 2
set xlabel "message bytes"
set key top left
set title "one-way time (us, smaller is better)"
plot "$dir/fig6-1-median.csv" using 1:2 skip 1 with linespoints title "AM (medium request and reply)", \
     "" using 1:3 skip 1 with linespoints title "VIPL send/receive"
set title "streaming bandwidth (MB/s, bigger is better)"
set logscale y
plot "$dir/fig6-1-median.csv" using 1:4 skip 1 with linespoints title "AM (medium requests)", \
     "" using 1:5 skip 1 with linespoints title "VIPL sends"
unset multiplot
EOF

# ---- zero copy against copies -----------------------------------------------------------------
{
  echo "bytes,rdma_get,copy_get,rdma_put,copy_put"
  m=$(awk -F, 'NR == 1 || $4 == "oneway"' "$dir/rdma.csv" | median_by /dev/stdin "2 3 5" 7)
  for b in $(awk -F, 'NR > 1 {print $5}' "$dir/rdma.csv" | sort -un); do
    pick() { awk -F, -v l="$1" -v o="$2" -v b="$b" '$1 == l && $2 == o && $3 == b {print $4}' <<<"$m"; }
    echo "$b,$(pick rdma bulk_get),$(pick copy bulk_get),$(pick rdma bulk_put),$(pick copy bulk_put)"
  done
} > "$dir/rdma-median.csv"
gnuplot <<EOF
set datafile separator ","
set terminal pngcairo size 900,550 noenhanced
set output "$dir/rdma.png"
set title "via-rel bulk operations, one-way: zero copy (RDMA) against the paper's copy path (MB/s)"
set logscale x 2
set logscale y
set xlabel "bytes"
set key top left
plot "$dir/rdma-median.csv" using 1:2 skip 1 with linespoints title "bulk_get, RDMA read", \
     "" using 1:3 skip 1 with linespoints title "bulk_get, copies (SPLITC_RDMA_MIN=0)", \
     "" using 1:4 skip 1 with linespoints title "bulk_put, RDMA write", \
     "" using 1:5 skip 1 with linespoints title "bulk_put, copies"
EOF

# ---- Figure 6-5 -------------------------------------------------------------------------------
# One data block per application and back end: procs time (the 1-process run belongs to all).
for app in fft3d cg cholesky em3d raytrace; do
  for be in am via-rel via-unrel shm; do
    awk -F, -v a="$app" -v b="$be" 'NR > 1 && $1 == a && ($4 == 1 || $3 == b) {print $4, $5}' "$dir/fig6-5.csv"
    printf '\n\n'
  done
done > "$dir/fig6-5.dat"
gnuplot <<EOF
set terminal pngcairo size 1500,900 noenhanced
set output "$dir/fig6-5.png"
set multiplot layout 2,3 title "Figure 6-5: the applications, time by process count (2 cores: 4 processes check correctness, not speed)"
set xlabel "processes"
set ylabel "seconds"
set xtics (1, 2, 4)
set logscale x 2
set key top right
apps = "fft3d cg cholesky em3d raytrace"
bes = "am via-rel via-unrel shm"
do for [a = 1:5] {
  set title word(apps, a)
  plot for [b = 1:4] "$dir/fig6-5.dat" index ((a - 1) * 4 + b - 1) using 1:2 with linespoints title word(bes, b)
}
unset multiplot
EOF
echo "reproduce_plot.sh: plots in $dir"
