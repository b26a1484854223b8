#!/usr/bin/env bash
# splitc_plot.sh -- plots of splitc_compare.sh's CSV, in the shape of the paper's
# Figures 6-3 (primitives on int, one-way and two-way) and 6-4 (bulk operations).
#
#   tools/bench/splitc_plot.sh CSV OUTDIR "am via-rel via-unrel" [NAME [WIRE]]
#
# Writes OUTDIR/NAME-prim.csv and NAME-prim.png (time per operation, medians over
# rounds, one bar per back end and OpenSHMEM), OUTDIR/NAME-bulk.csv and NAME-bulk.png
# (MB/s against size: one-way bulk_get, two-way bulk_read, bulk_get and bulk_store).
# NAME defaults to splitc; WIRE (default shm) says in the titles what the figures ran
# over. Needs gnuplot (Debian: gnuplot-nox).
set -euo pipefail
csv=$1 out=$2 backends=$3 name=${4:-splitc} wire=${5:-shm}
command -v gnuplot >/dev/null || { echo "splitc_plot.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
mkdir -p "$out"
# OpenSHMEM's column only when it ran (oshcc needs libopenmpi-dev): gnuplot refuses a
# histogram column with no valid points.
labels=$backends
awk -F, '$2 ~ /^oshmem-/ {f = 1; exit} END {exit !f}' "$csv" && labels="$labels oshmem"

# Medians over rounds: label prefixes "<backend>-<round>" and "oshmem-<round>".
median_of() {  # base op mode bytes column
  awk -F, -v base="$1" -v o="$2" -v m="$3" -v b="$4" -v c="$5" '
    { l = $2; sub(/-[0-9]+$/, "", l) }
    l == base && $3 == o && $4 == m && $5 == b { print $c }' "$csv" |
    sort -g | awk '{v[NR]=$1} END {if (!NR) print "NaN"; else print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'
}

{
  printf "op"; for l in $labels; do printf ",%s" "$l"; done; printf "\n"
  for mode in oneway twoway; do
    for op in read write get put store fadd; do
      bytes=4; [[ $op == fadd ]] && bytes=8
      printf "%s %s" "$op" "${mode/way/-way}"
      for l in $labels; do printf ",%s" "$(median_of "$l" "$op" "$mode" $bytes 6)"; done
      printf "\n"
    done
  done
  printf "barrier"
  for l in $labels; do printf ",%s" "$(median_of "$l" barrier twoway 0 6)"; done
  printf "\n"
} > "$out/$name-prim.csv"

sizes=$(awk -F, 'NR > 1 && $3 == "bulk_get" {print $5}' "$csv" | sort -un | tr '\n' ' ')
{
  printf "bytes"
  for l in $labels; do for c in "bulk_get oneway" "bulk_read twoway" "bulk_get twoway" "bulk_store twoway"; do
    set -- $c; printf ",%s %s %s" "$l" "$1" "$2"; done; done
  printf "\n"
  for s in $sizes; do
    printf "%s" "$s"
    for l in $labels; do for c in "bulk_get oneway" "bulk_read twoway" "bulk_get twoway" "bulk_store twoway"; do
      set -- $c; printf ",%s" "$(median_of "$l" "$1" "$2" "$s" 7)"; done; done
    printf "\n"
  done
} > "$out/$name-bulk.csv"

n=$(wc -w <<< "$labels")
gnuplot <<EOF
set datafile separator ","
set terminal pngcairo size 1100,600 noenhanced
set output "$out/$name-prim.png"
set title "Split-C primitives on int, 2 processes (smaller is better): $wire"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "us per operation"
set logscale y
set xtics rotate by -30
set key top left
plot for [i=2:$((n + 1))] "$out/$name-prim.csv" using i:xtic(1) title columnhead(i)
EOF

gnuplot <<EOF
set datafile separator ","
set terminal pngcairo size 1100,650 noenhanced
set output "$out/$name-bulk.png"
set title "Split-C bulk operations (bigger is better): $wire"
set logscale x 2
set logscale y
set xlabel "bytes"
set ylabel "MB/s"
set key outside right
plot for [i=2:$((4 * n + 1))] "$out/$name-bulk.csv" using 1:i with linespoints title columnhead(i)
EOF
