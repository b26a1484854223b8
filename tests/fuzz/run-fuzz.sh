#!/usr/bin/env bash
# tests/fuzz/run-fuzz.sh [SECONDS] [libFuzzer options...]
#
# Builds frame_fuzzer with clang in its own build directory and fuzzes the firmware's
# frame parser for SECONDS (default 60) on a copy of tests/fuzz/corpus. Exits non-zero
# when the fuzzer finds a crash, a sanitizer report or an invariant violation; the input
# is then under $FUZZ_BUILD_DIR/fuzz-run/ (crash-*, leak-*, timeout-*, oom-*).
#
# Environment:
#   FUZZ_BUILD_DIR  build directory (default: <repo>/build/fuzz-clang)
#   FUZZ_CORPUS     corpus to grow (default: a fresh copy of tests/fuzz/corpus under the
#                   build directory; the checked-in seeds are never modified)
#   CC, CXX         compilers (default clang, clang++)
#   FUZZ_BUILD_JOBS parallel compile jobs (default 2)
# Extra arguments go to libFuzzer, e.g. -jobs=2 -workers=2 or -seed=1.
set -euo pipefail

secs=${1:-60}
shift || true
case "$secs" in
  ''|*[!0-9]*) echo "usage: $0 [SECONDS] [libFuzzer options...]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bdir=${FUZZ_BUILD_DIR:-$repo/build/fuzz-clang}
run=$bdir/fuzz-run

export CC=${CC:-clang} CXX=${CXX:-clang++}
mkdir -p "$bdir"
cmake -S "$repo" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTVIA_BUILD_TESTS=ON \
  >"$bdir/configure.log" 2>&1 ||
  { cat "$bdir/configure.log" >&2; echo "run-fuzz.sh: configure failed" >&2; exit 2; }
ninja -C "$bdir" -j "${FUZZ_BUILD_JOBS:-2}" frame_fuzzer
fuzzer=$bdir/tests/fuzz/frame_fuzzer
[ -x "$fuzzer" ] || { echo "run-fuzz.sh: $fuzzer not built (is the C++ compiler clang?)" >&2; exit 2; }

mkdir -p "$run"
corpus=${FUZZ_CORPUS:-$run/corpus}
if [ -z "${FUZZ_CORPUS:-}" ]; then
  rm -rf "$corpus"
  cp -r "$here/corpus" "$corpus"
fi

touch "$run/.start"
echo "run-fuzz.sh: fuzzing for ${secs}s, corpus $corpus, artifacts $run/"
set +e
"$fuzzer" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$run/" "$@" "$corpus"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "run-fuzz.sh: frame_fuzzer exited with $rc; reproducer(s):" >&2
  find "$run" -maxdepth 1 -newer "$run/.start" \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) -printf '  %p\n' >&2
  echo "run-fuzz.sh: replay one with: $fuzzer <file>" >&2
fi
exit $rc
