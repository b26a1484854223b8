#!/bin/sh
# sc_via_check.sh -- runs one job of the VIA back ends' tests and checks more than its
# exit status (tests/splitc/CMakeLists.txt registers them).
#
#   sc_via_check.sh [--fail REGEX] [--within SECONDS] [--retransmits] [--rdma] -- COMMAND...
#
#   --fail REGEX    the job must fail (status not 0 nor 77) and its output match REGEX;
#                   without it the job must succeed
#   --within S      the job must end within S seconds
#   --retransmits   some process must have sent messages again (via-unrel: the losses
#                   were real and recovered), from the SPLITC_VIA_STATS lines
#   --rdma          some process must have made RDMA transfers (via-rel zero copy)
# A job that exits 77 (cannot run here) passes that on.
fail= within= retr= rdma=
while [ $# -gt 0 ]; do
    case $1 in
    --fail) fail=$2; shift 2 ;;
    --within) within=$2; shift 2 ;;
    --retransmits) retr=1; shift ;;
    --rdma) rdma=1; shift ;;
    --) shift; break ;;
    *) echo "sc_via_check.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT
export SPLITC_VIA_STATS=1
t0=$(date +%s.%N)
"$@" >"$out" 2>&1
rc=$?
t1=$(date +%s.%N)
cat "$out"
[ $rc -eq 77 ] && exit 77
secs=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
echo "sc_via_check.sh: status $rc after $secs s"
bad() { echo "sc_via_check.sh: FAILED: $*"; exit 1; }
if [ -n "$fail" ]; then
    [ $rc -ne 0 ] || bad "the job succeeded; it should have failed"
    grep -Eq "$fail" "$out" || bad "no line matches '$fail'"
else
    [ $rc -eq 0 ] || bad "the job failed (status $rc)"
fi
if [ -n "$within" ] && awk "BEGIN { exit !($secs > $within) }"; then
    bad "it took $secs s, more than $within s"
fi
sum() { grep -o "$1 [0-9]*" "$out" | awk '{s += $2} END {print s + 0}'; }
if [ -n "$retr" ] && [ "$(sum retransmits)" -eq 0 ]; then bad "no process sent anything again: were there losses?"; fi
if [ -n "$rdma" ] && [ "$(sum rdma)" -eq 0 ]; then bad "no RDMA transfer was made"; fi
exit 0
