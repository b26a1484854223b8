#!/usr/bin/env bash
# apps_speedup.sh -- NPB FT class S and CG classes S and W on 2 processes of one host with
# the same-host path (SPLITC_SHM=on) beside the same programs on one process, measured now
# in rounds (this VM's speed drifts): the target is a speedup of at least 1 (docs/apps.md).
#
#   tools/bench/apps_speedup.sh [BUILD_DIR] [--rounds N]
#
# Each run is the best of 3 timed repetitions (--reps 3), both processes pinned to cores 0
# and 1; the speedup per round is one-process time / two-process time, the summary the
# median of the rounds'. Every run verifies its result against NPB's published values.
set -uo pipefail
build=build/release rounds=5
while (($#)); do
  case $1 in
    --rounds) rounds=${2:?}; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
run=$build/tools/launcher/softvia-run
for f in "$run" "$build/apps/fft3d" "$build/apps/cg"; do [[ -x $f ]] || { echo "apps_speedup.sh: $f not built" >&2; exit 2; }; done
one() {  # app size procs -> seconds (empty on failure)
  SPLITC_SHM=on SOFTVIA_DEVICE=shm SOFTVIA_PROGRESS=inline "$run" -n "$3" --pin "$build/apps/$1" --size "$2" --reps 3 2>/dev/null |
    awk '/^app=/ && /verified=yes/ { for (i = 1; i <= NF; i++) if ($i ~ /^time_s=/) { sub(/time_s=/, "", $i); print $i } }'
}
median() { printf '%s\n' "$@" | awk 'NF' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }
printf "%-10s %10s %10s %8s   %s\n" "problem" "1 proc s" "2 procs s" "speedup" "(median of $rounds rounds; target >= 1)"
status=0
for case in "fft3d S" "cg S" "cg W"; do
  set -- $case
  t1s=() t2s=() qs=()
  for ((r = 1; r <= rounds; r++)); do
    t1=$(one "$1" "$2" 1) t2=$(one "$1" "$2" 2)
    [[ -n $t1 && -n $t2 ]] || { echo "apps_speedup.sh: $1 class $2 failed or was not verified" >&2; status=1; continue; }
    t1s+=("$t1") t2s+=("$t2") qs+=("$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.3f", a / b}')")
  done
  q=$(median "${qs[@]}")
  printf "%-10s %10s %10s %8s   %s\n" "$1 $2" "$(median "${t1s[@]}")" "$(median "${t2s[@]}")" "$q" \
    "$(awk -v q="$q" 'BEGIN { print (q != "" && q >= 1) ? "met" : "NOT met" }')"
done
exit $status
