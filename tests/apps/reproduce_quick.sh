#!/bin/sh
# reproduce_quick.sh SOURCE_DIR BUILD_DIR -- tools/reproduce/reproduce.sh --quick into a
# temporary directory: every CSV and PNG of the paper's figures, without error (the tool
# checks that each file was written and each application verified its result).
src=$1 build=$2
command -v gnuplot >/dev/null || { echo "reproduce_quick.sh: skipped: no gnuplot (apt-get install gnuplot-nox)"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/reproduce.XXXXXX") || exit 1
"$src/tools/reproduce/reproduce.sh" "$build" --quick --out "$out" || exit 1
for f in fig6-1.csv fig6-1-median.csv fig6-1.png fig6-2-steer.csv fig6-2-marshal.csv fig6-2.png fig6-3-6-4.csv \
         fig6-3.csv fig6-3.png fig6-4.csv fig6-4.png rdma.csv rdma-median.csv rdma.png fig6-5-runs.csv fig6-5.csv fig6-5.png \
         reproduction.md; do
  [ -s "$out/$f" ] || { echo "reproduce_quick.sh: $out/$f is missing or empty"; exit 1; }
done
echo "reproduce_quick.sh: every CSV, PNG and the report written"
rm -rf "$out"
