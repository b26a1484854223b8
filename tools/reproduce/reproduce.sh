#!/usr/bin/env bash
# reproduce.sh -- the paper's figures (section 6 of ../shared/seeds' Split-C paper) measured
# now on this stack: CSVs, PNG plots, and a report with each figure beside the paper's claim.
#
#   tools/reproduce/reproduce.sh [BUILD_DIR] [--quick] [--out DIR] [--report FILE]
#
#   Figure 6-1   AM one-way time and streaming bandwidth by message size, beside VIPL
#   Table 6-1,   the LogP parameters and signature of AM (am_bench --only logp)
#   Figure 6-2
#   Figure 6-3   Split-C primitives on int, one-way and two-way, every back end, beside
#   Figure 6-4   OpenSHMEM; bulk operations from 4 B (tools/bench/splitc_compare.sh)
#   Figure 6-5   the five applications (apps/) on every back end and process count
#   beyond       via-rel's zero-copy bulk path (RDMA) against the paper's copy path
#
# Two processes (and the applications' 1, 2 and 4) pinned to cores 0 and 1; the network
# back ends on the shm NIC with SPLITC_SHM=off, "shm" the same-host path. Comparisons are
# made in rounds, back to back (this VM's speed drifts); figures are medians of rounds.
# --quick: one round, short runs, small problem sizes, 1 and 2 processes: every CSV and
# PNG, in about a minute (CI runs it). Writes DIR (default BUILD_DIR/reproduction) and the
# report (default docs/reproduction.md; DIR/reproduction.md with --quick).
# Exit status: 0 when every run worked and every application verified its result.
set -uo pipefail
build=build/release quick=0 out="" report=""
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --report) report=${2:?--report needs a file}; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "reproduce.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ -d $build ]] || { echo "reproduce.sh: no build directory $build (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ -n $out ]] || out=$build/reproduction
[[ -n $report ]] || { if ((quick)); then report=$out/reproduction.md; else report=$root/docs/reproduction.md; fi; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Nothing of an earlier run may stand in for this one's.
rm -f "$out"/*.csv "$out"/*.png "$out"/*.dat "$out"/*.err "$out"/*.txt "$out/reproduction.md"
run=$build/tools/launcher/softvia-run
for f in "$run" "$build/tools/bench/am_bench" "$build/tools/bench/vipl_bench" "$build/tools/bench/splitc_bench" \
         "$build/apps/fft3d" "$build/apps/cg" "$build/apps/cholesky" "$build/apps/em3d" "$build/apps/raytrace"; do
  [[ -x $f ]] || { echo "reproduce.sh: $f is not built (cmake --build $build)" >&2; exit 2; }
done
command -v gnuplot >/dev/null || { echo "reproduce.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 2; }
rounds=5; ((quick)) && rounds=1
failed=()
step() { echo "== $*"; }
export SOFTVIA_DEVICE=shm SOFTVIA_PROGRESS=inline SOFTVIA_FAULTS= SOFTVIA_HOSTS=

# ---- Figure 6-1: AM and VIPL by message size ------------------------------------------------
sizes=4,16,64,256,1024,4096
iters=20000 msgs=200000
((quick)) && { iters=2000 msgs=20000; }
csv61=$out/fig6-1.csv
echo "kind,label,bytes,one_way_us,p99_us,MBps,msgs_per_s" > "$csv61"
for ((r = 1; r <= rounds; r++)); do
  step "Figure 6-1, round $r of $rounds: AM (medium messages) and VIPL by size"
  timeout 600 "$run" -n 2 --pin "$build/tools/bench/am_bench" --only sizes --sizes "$sizes" --iters "$iters" \
    --msgs "$msgs" --csv "$csv61" --label "am-$r" >/dev/null || failed+=("am_bench sizes")
  timeout 600 "$run" -n 2 --pin "$build/tools/bench/vipl_bench" --sizes "$sizes" --iters "$iters" --only lat \
    --csv "$csv61" --label "vipl-$r" >/dev/null || failed+=("vipl_bench latency")
  timeout 600 "$run" -n 2 --pin "$build/tools/bench/vipl_bench" --sizes "$sizes" --only bw --csv "$csv61" \
    --label "vipl-$r" >/dev/null || failed+=("vipl_bench bandwidth")
done

# ---- Table 6-1 and Figure 6-2: LogP ----------------------------------------------------------
step "Table 6-1 / Figure 6-2: the LogP signature (both AM modes: tools/bench/am_logp_plot.sh)"
if "$root/tools/bench/am_logp_plot.sh" "$build" "$out" "$iters" >/dev/null; then
  for mode in steer marshal; do mv -f "$out/am-logp-$mode.csv" "$out/fig6-2-$mode.csv"; done
  mv -f "$out/am-logp.png" "$out/fig6-2.png"
  rm -f "$out"/am-logp-*.dat
else
  failed+=("am_logp_plot.sh")
fi

# ---- Figures 6-3 and 6-4: Split-C primitives and bulk, beside OpenSHMEM -------------------------
step "Figures 6-3 / 6-4: splitc_compare.sh (every back end, OpenSHMEM beside them)"
q=(); ((quick)) && q=(--quick)
"$root/tools/bench/splitc_compare.sh" "$build" "${q[@]}" --plot "$out" > "$out/splitc_compare.txt" 2>&1 ||
  failed+=("splitc_compare.sh")
cp "$build/splitc-results-shm.csv" "$out/fig6-3-6-4.csv" 2>/dev/null || failed+=("splitc_compare.sh's CSV")
mv -f "$out/splitc-shm-prim.png" "$out/fig6-3.png" 2>/dev/null || failed+=("Figure 6-3's plot")
mv -f "$out/splitc-shm-bulk.png" "$out/fig6-4.png" 2>/dev/null || failed+=("Figure 6-4's plot")
mv -f "$out/splitc-shm-prim.csv" "$out/fig6-3.csv" 2>/dev/null || failed+=("Figure 6-3's CSV")
mv -f "$out/splitc-shm-bulk.csv" "$out/fig6-4.csv" 2>/dev/null || failed+=("Figure 6-4's CSV")

# ---- beyond the paper: via-rel's zero copy (RDMA) against the copy path -----------------------
step "via-rel bulk operations: zero copy (RDMA from 4 KiB) against copies (SPLITC_RDMA_MIN=0)"
csvr=$out/rdma.csv
echo "kind,label,op,mode,bytes,us_per_op,MBps" > "$csvr"
bsizes=1024,4096,16384,65536,262144
((quick)) && bsizes=4096,65536
for ((r = 1; r <= rounds; r++)); do
  for rd in default 0; do
    label=rdma-$r; [[ $rd == 0 ]] && label=copy-$r
    extra=(); [[ $rd == 0 ]] && extra=(SPLITC_RDMA_MIN=0)
    env SPLITC_SHM=off SPLITC_BACKEND=via-rel "${extra[@]}" \
      timeout 600 "$run" -n 2 --pin "$build/tools/bench/splitc_bench" --only bulk --local-heap --sizes "$bsizes" \
      --iters "$((quick ? 300 : 3000))" --csv "$csvr" --label "$label" >/dev/null || failed+=("splitc_bench rdma=$rd")
  done
done

# ---- Figure 6-5: the applications ----------------------------------------------------------
# In rounds (3, 1 with --quick): each application's 1-, 2- and 4-process runs back to back,
# so that a speedup never divides times from two different phases of this VM. Every run is
# in fig6-5-runs.csv; fig6-5.csv holds the medians of the rounds.
runs65=$out/fig6-5-runs.csv
echo "app,size,backend,procs,round,time_s,rate,unit,verified" > "$runs65"
rounds65=3; ((quick)) && rounds65=1
procs=(1 2 4); asize=paper
((quick)) && { procs=(1 2); asize=small; }
backends=(am via-rel via-unrel shm)
app_run() {  # app backend procs round -> a CSV line
  local app=$1 be=$2 n=$3 r=$4 env line
  if [[ $be == shm ]]; then env=(SPLITC_SHM=on SPLITC_BACKEND=am); else env=(SPLITC_SHM=off SPLITC_BACKEND=$be); fi
  # the best of 3 timed runs on 1 and 2 processes (the parallel runs); 4 share 2 cores: once
  local reps=3
  ((n > 2)) && reps=1
  line=$(cd "$out" && env "${env[@]}" timeout 1800 "$run" -n "$n" --pin "$build/apps/$app" --size "$asize" --reps $reps \
         2>"$out/$app-$be-$n.err" | grep '^app=')
  if [[ -z $line || $line != *verified=yes* ]]; then
    failed+=("$app on $be, $n processes (see $out/$app-$be-$n.err)")
    echo "  $app $be n=$n: FAILED"
    return
  fi
  local t rate unit
  t=$(sed 's/.*time_s=\([^ ]*\).*/\1/' <<<"$line"); rate=$(sed 's/.* rate=\([^ ]*\).*/\1/' <<<"$line")
  unit=$(sed 's/.* unit=\([^ ]*\).*/\1/' <<<"$line")
  echo "$app,$asize,$be,$n,$r,$t,$rate,$unit,yes" >> "$runs65"
  printf "  %-9s %-10s n=%d  %10.4f s  %10.1f %s\n" "$app" "$be" "$n" "$t" "$rate" "$unit"
}
for ((r = 1; r <= rounds65; r++)); do
  for app in fft3d cg cholesky em3d raytrace; do
    step "Figure 6-5, round $r of $rounds65: $app ($asize) on every back end"
    for n in "${procs[@]}"; do
      if ((n == 1)); then app_run "$app" am 1 "$r"; continue; fi  # one process: no back end is used
      for be in "${backends[@]}"; do app_run "$app" "$be" "$n" "$r"; done
    done
  done
done
# the medians of the rounds, one line per application, back end and process count
awk -F, 'NR > 1 { k = $1 "," $2 "," $3 "," $4; if (!(k in n)) order[++m] = k; n[k]++; t[k, n[k]] = $6; v[k, n[k]] = $7; u[k] = $8 }
  END { print "app,size,backend,procs,time_s,rate,unit,verified"
        for (j = 1; j <= m; j++) { k = order[j]; c = n[k]
          for (a = 1; a <= c; a++) for (b = a + 1; b <= c; b++) if (t[k, b] < t[k, a]) { x = t[k, a]; t[k, a] = t[k, b]; t[k, b] = x; x = v[k, a]; v[k, a] = v[k, b]; v[k, b] = x }
          mid = int((c + 1) / 2); print k "," t[k, mid] "," v[k, mid] "," u[k] ",yes" } }' "$runs65" > "$out/fig6-5.csv"

# ---- plots and the report ---------------------------------------------------------------------
step "plots"
"$here/reproduce_plot.sh" "$out" || failed+=("reproduce_plot.sh")
for f in fig6-1.csv fig6-1-median.csv fig6-1.png fig6-2-steer.csv fig6-2-marshal.csv fig6-2.png fig6-3-6-4.csv \
         fig6-3.csv fig6-3.png fig6-4.csv fig6-4.png rdma.csv rdma-median.csv rdma.png fig6-5-runs.csv fig6-5.csv \
         fig6-5.png; do
  [[ -s $out/$f ]] || failed+=("$out/$f was not written")
done
: > "$out/failures.txt"
((${#failed[@]})) && printf '%s\n' "${failed[@]}" > "$out/failures.txt"
# The report in docs/ links to copies of the figures under docs/figures/reproduction; a
# run with failures does not replace them (its report goes beside its figures).
figdir=$out
if ((${#failed[@]})) && [[ $(realpath "$(dirname "$report")") == "$root/docs" ]]; then
  echo "reproduce.sh: ${#failed[@]} problem(s): the report goes to $out/reproduction.md, docs/ stays as it was"
  report=$out/reproduction.md
fi
if [[ $(realpath "$(dirname "$report")") == "$root/docs" ]]; then
  figdir=$root/docs/figures/reproduction
  mkdir -p "$figdir"
  cp "$out"/*.png "$out"/*.csv "$out/splitc_compare.txt" "$figdir/"
fi
step "report: $report"
"$here/reproduce_report.sh" "$out" "$report" "$quick" "$figdir" || failed+=("reproduce_report.sh")
[[ -s $report ]] || failed+=("$report was not written")
if ((${#failed[@]})); then
  echo "reproduce.sh: ${#failed[@]} problem(s):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "reproduce.sh: every figure in $out; the report in $report"
