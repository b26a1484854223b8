#!/usr/bin/env bash
# sc_bad.sh LAUNCHER SC_BAD NPROCS [full|cover] -- every bad-global-pointer case of
# sc_bad with every call (sc_bad.c lists both): each job must stop with status 1 (the
# runtime's error), within 20 s, with the message sc_bad announces (call, process,
# address), no process killed by a signal, and (with an owner apart from the caller) the
# owner's memory unchanged. Runs them all, then says which failed.
# cover runs a quarter of the pairs instead (every call with three cases, every case
# with five calls or more): the test list runs the whole matrix on the default back end
# (am, 2 processes) and this cover on the others; the long runs (ctest -L long) run the
# whole matrix everywhere.
set -u
here=$(cd "$(dirname "$0")" && pwd)
launcher=$1 prog=$2 n=$3
matrix=${4:-full}
case $matrix in full|cover) ;; *) echo "sc_bad.sh: matrix '$matrix': want full or cover" >&2; exit 2 ;; esac
export SPLITC_HEAP_SIZE=1M
cases="proc procneg null stack unmapped heapend straddle dataend unmade relro gotplt copyrel"
calls="read_char write_short get_int put_long store_longlong read_float write_double get_double put_char
       store_float read_long store_int bulk_read bulk_write bulk_get bulk_put bulk_store atomic_call
       atomic_fetch_add_long atomic_cswap_long"
# The owner checks its memory after every poll (a change ends the job with CORRUPTED),
# and says it is intact when the launcher stops it; it may instead stop on its own first,
# with the runtime's message that the caller is gone (its checks ran until then).
owner_check=()
[ "$n" -gt 1 ] && owner_check=(--want-either "sc_bad: owner memory intact" "splitc: process 1: ")
failed=() runs=0 ci=0
for c in $cases; do
    ci=$((ci + 1)) li=0
    for call in $calls; do
        li=$((li + 1))
        [ "$matrix" = cover ] && [ $(((ci + li) % 4)) -ne 0 ] && continue
        # 2 bytes before the heap's end are a valid target for 1- and 2-byte accesses (and
        # atomic_call checks one byte): no straddle there.
        if [ "$c" = straddle ]; then
            case $call in read_char|put_char|write_short|atomic_call) continue ;; esac
        fi
        runs=$((runs + 1))
        if ! "$here/sc_expect.sh" --quiet --status 1 --max-seconds 20 --reject "killed by signal" \
                --reject "CORRUPTED" --reject "went through" --want "sc-expect-line: " "${owner_check[@]+"${owner_check[@]}"}" \
                -- "$launcher" -n "$n" --timeout 30 "$prog" "$c" "$call"; then
            failed+=("$c/$call")
        fi
    done
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "sc_bad.sh: ${#failed[@]} of $runs cases failed (${SPLITC_BACKEND:-am}, $n processes): ${failed[*]}"
    exit 1
fi
echo "sc_bad.sh: all $runs cases stopped as they must (${SPLITC_BACKEND:-am}, $n processes, $matrix matrix)"
