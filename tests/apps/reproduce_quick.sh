#!/bin/sh
# reproduce_quick.sh SOURCE_DIR BUILD_DIR -- tools/reproduce/reproduce.sh --quick into a
# temporary directory: every CSV and PNG of the paper's figures, without error (the tool
# checks that each file was written and each application verified its result).
src=$1 build=$2
command -v gnuplot >/dev/null || { echo "reproduce_quick.sh: skipped: no gnuplot (apt-get install gnuplot-nox)"; exit 77; }
out=$(mktemp -d "${TMPDIR:-/tmp}/reproduce.XXXXXX") || exit 1
"$src/tools/reproduce/reproduce.sh" "$build" --quick --out "$out"
rc=$?
[ $rc -eq 0 ] && ls "$out"/*.png "$out"/*.csv && rm -rf "$out"
exit $rc
