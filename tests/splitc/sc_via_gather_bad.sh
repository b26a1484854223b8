#!/usr/bin/env bash
# sc_via_gather_bad.sh LAUNCHER SC_VIA_GATHER_BAD -- every put, get and store call, refused
# inside a gathered message (first, in the middle, last in turn): each job must stop with
# status 1 within 20 s and the runtime's message naming that call, the process, the
# address and the length; no process killed by a signal. Runs them all, then says which
# failed. The back end and SPLITC_GATHER / SPLITC_STORE_BATCH come from the environment.
set -u
here=$(cd "$(dirname "$0")" && pwd)
launcher=$1 prog=$2
pos=(first middle last)
failed=() runs=0
for op in put get store; do
    for t in char short int long longlong float double; do
        p=${pos[$((runs % 3))]}
        runs=$((runs + 1))
        if ! "$here/sc_expect.sh" --quiet --status 1 --max-seconds 20 --reject "killed by signal" \
                --reject "went through" --want "sc-expect-line: " \
                -- "$launcher" -n 2 --timeout 30 "$prog" "${op}_$t" "$p"; then
            failed+=("${op}_$t/$p")
        fi
    done
done
if [ ${#failed[@]} -ne 0 ]; then
    echo "sc_via_gather_bad.sh: ${#failed[@]} of $runs cases failed (${SPLITC_BACKEND:-am}): ${failed[*]}"
    exit 1
fi
echo "sc_via_gather_bad.sh: all $runs cases stopped naming their call (${SPLITC_BACKEND:-am})"
