#!/bin/sh
# sc_via_bad_settings.sh -- the VIA back ends refuse a bad setting, naming it and what is
# accepted (docs/splitc.md, "Settings"), and take an edge value that is good; so does the
# runtime for SPLITC_SHM.
#
#   sc_via_bad_settings.sh SOFTVIA_RUN SC_SMOKE
run=$1 prog=$2
[ -x "$run" ] && [ -x "$prog" ] || { echo "usage: sc_via_bad_settings.sh SOFTVIA_RUN SC_SMOKE" >&2; exit 2; }
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT
failures=0
# expect VAR VALUE BACKEND good|bad
expect() {
    env "SPLITC_BACKEND=$3" "$1=$2" "$run" -n 2 --timeout 60 "$prog" >"$out" 2>&1
    rc=$?
    if [ "$4" = bad ]; then
        if [ $rc -eq 0 ] || ! grep -q "$1='$2': accepted values are" "$out"; then
            echo "FAILED: $1='$2' on $3: status $rc, and no line naming the setting:"
            cat "$out"
            failures=$((failures + 1))
        else
            echo "ok: $1='$2' on $3 refused: $(grep -m1 "$1=" "$out")"
        fi
    elif [ $rc -ne 0 ]; then
        echo "FAILED: $1='$2' on $3 is a good value, but the job failed (status $rc):"
        cat "$out"
        failures=$((failures + 1))
    else
        echo "ok: $1='$2' on $3 taken"
    fi
}
for be in via-rel via-unrel; do
    for v in abc 0 -5 1e3 " 5" 3600001 99999999999999999999; do expect SPLITC_PEER_TIMEOUT_MS "$v" $be bad; done
    for v in x -1 12k 1073741825; do expect SPLITC_RDMA_MIN "$v" $be bad; done
    for v in 2 yes -0; do expect SPLITC_STORE_BATCH "$v" $be bad; done
    for v in 2 no " 1"; do expect SPLITC_GATHER "$v" $be bad; done
done
# The same-host path's switch (any back end: it is read first).
for v in yes 2 ON " on"; do expect SPLITC_SHM "$v" am bad; done
expect SPLITC_SHM on via-rel good
expect SPLITC_SHM off am good
expect SPLITC_PEER_TIMEOUT_MS 3600000 via-unrel good
expect SPLITC_PEER_TIMEOUT_MS 1 via-rel good
expect SPLITC_RDMA_MIN 0 via-rel good
expect SPLITC_RDMA_MIN 9 via-rel good
expect SPLITC_STORE_BATCH 0 via-unrel good
expect SPLITC_GATHER 0 via-rel good
[ $failures -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "sc_via_bad_settings: all cases as expected"
