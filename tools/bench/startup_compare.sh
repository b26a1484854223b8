#!/usr/bin/env bash
# startup_compare.sh [BUILD_DIR] [ROUNDS] - start-up time of a job (from the launcher's
# start to the job's first barrier) under softvia-run and under Open MPI's mpirun (PMIx),
# 2, 4 and 8 processes, the two launchers back to back in each round; medians.
set -euo pipefail
B=${1:-build/release}
ROUNDS=${2:-5}
command -v mpirun >/dev/null || { echo "mpirun not installed (Debian: openmpi-bin)" >&2; exit 1; }
bench=$B/tools/bench/startup_bench
run=$B/tools/launcher/softvia-run
median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else printf "%.1f\n", (v[NR/2]+v[NR/2+1])/2}'; }
printf '%-6s %18s %18s %8s\n' procs "softvia-run (ms)" "mpirun (ms)" ratio
for n in 2 4 8; do
    sr=() mr=()
    for ((r = 0; r < ROUNDS; r++)); do
        sr+=("$("$run" -n "$n" "$bench" "$(date +%s%N)" | awk '{print $3}')")
        mr+=("$(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$bench" "$(date +%s%N)" |
            awk '{print $3}')")
    done
    s=$(printf '%s\n' "${sr[@]}" | median)
    m=$(printf '%s\n' "${mr[@]}" | median)
    printf '%-6s %18s %18s %8.2f\n' "$n" "$s" "$m" "$(awk -v m="$m" -v s="$s" 'BEGIN {print m / s}')"
done
