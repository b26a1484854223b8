#!/usr/bin/env bash
# sc_expect.sh -- runs one Split-C job that is meant to end in a given way, and checks it.
#
# usage: sc_expect.sh [--status N|nonzero|nonzero-or-signal] [--max-seconds S] [--want TEXT]... [--reject TEXT]...
#                     [--want-either TEXT1 TEXT2]... [--quiet] -- softvia-run -n N program args...
#
# Checks: the exit status (N; for "nonzero" any non-zero one below 124: 124 is the
# launcher's timeout, 128+sig a process killed by a signal; "nonzero-or-signal" allows
# the signals too, not the timeout nor the launcher's own 125-127), that the job took at most S seconds, that
# every --want TEXT is in the output (stdout and stderr together), one of the two texts
# of every --want-either is, that no --reject TEXT is, and that every "sc-expect-line: TEXT" a program printed is also in another line
# of the output (the program knows what the runtime's message must say; grep -F, so
# TEXT is literal). Prints the output and what failed; exits 0 if all holds, else 1.
set -u
status=0
max=60
wants=()
eithers=()
rejects=()
quiet=0
while [ $# -gt 0 ]; do
    case "$1" in
        --status) status=$2; shift 2 ;;
        --max-seconds) max=$2; shift 2 ;;
        --want) wants+=("$2"); shift 2 ;;
        --reject) rejects+=("$2"); shift 2 ;;
        --want-either) eithers+=("$2" "$3"); shift 3 ;;
        --quiet) quiet=1; shift ;;
        --) shift; break ;;
        *) echo "sc_expect.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "sc_expect.sh: no command" >&2; exit 2; }

# Nothing here but the job runs as a process of its own (no mktemp, date or grep):
# sc_bad.sh runs this once per case, hundreds of times per test, and those forks cost
# more than the jobs did. The output still goes to a file (a process the job leaves
# behind cannot hold it up); matching is literal, as grep -F was ("..." quoted inside
# [[ == ]]).
now_us() { local t=${EPOCHREALTIME/[^0-9]/}; REPLY=$((10#$t)); } # the radix is the locale's
outf=${TMPDIR:-/tmp}/sc_expect.$$.$RANDOM$RANDOM
set -C; : >"$outf" || exit 2; set +C # created here, not an existing file
trap 'rm -f "$outf"' EXIT
now_us; start=$REPLY
"$@" >"$outf" 2>&1
rc=$?
now_us; elapsed_ms=$(( (REPLY - start) / 1000 ))
mapfile -t lines <"$outf"
printf -v out '%s\n' "${lines[@]+"${lines[@]}"}"

fail=()
if [ "$status" = nonzero ]; then
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then fail+=("exit status $rc: wanted a non-zero status from an orderly exit (not a signal, not a timeout)"); fi
elif [ "$status" = nonzero-or-signal ]; then
    if [ "$rc" -eq 0 ] || { [ "$rc" -ge 124 ] && [ "$rc" -le 127 ]; }; then fail+=("exit status $rc: wanted the status of a failed job (not 0, not the launcher's timeout or own error)"); fi
elif [ "$rc" -ne "$status" ]; then
    fail+=("exit status $rc, wanted $status")
fi
if [ "$elapsed_ms" -gt $((max * 1000)) ]; then fail+=("took ${elapsed_ms} ms, at most ${max} s allowed"); fi
for w in "${wants[@]+"${wants[@]}"}"; do
    [[ $out == *"$w"* ]] || fail+=("missing from the output: '$w'")
done
for ((i = 0; i < ${#eithers[@]}; i += 2)); do
    [[ $out == *"${eithers[i]}"* || $out == *"${eithers[i+1]}"* ]] ||
        fail+=("missing from the output: '${eithers[i]}' or '${eithers[i+1]}'")
done
for r in "${rejects[@]+"${rejects[@]}"}"; do
    [[ $out == *"$r"* ]] && fail+=("in the output, must not be: '$r'")
done
# Every "sc-expect-line: TEXT" line's TEXT must be in a line without that marker.
marked=() others=""
for line in "${lines[@]+"${lines[@]}"}"; do
    if [[ $line == *"sc-expect-line: "* ]]; then marked+=("${line#*sc-expect-line: }"); else others+=$line$'\n'; fi
done
for text in "${marked[@]+"${marked[@]}"}"; do
    [[ $others == *"$text"* ]] || fail+=("no message with '$text'")
done

if [ ${#fail[@]} -eq 0 ]; then
    [ "$quiet" = 1 ] || { printf '%s' "$out"; echo "sc_expect.sh: ok (status $rc, ${elapsed_ms} ms): $*"; }
    exit 0
fi
echo "---- output of: $*"
printf '%s' "$out"
echo "----"
for f in "${fail[@]}"; do echo "sc_expect.sh: FAIL: $f"; done
exit 1
