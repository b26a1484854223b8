#!/usr/bin/env bash
# nicinfo_test.sh NICINFO TARGET
# Starts TARGET (nicinfo_target: one NIC, two VIs connected peer to peer, 10 messages
# sent, a third VI left idle), then checks what softvia-nicinfo reports about it.
# Needs only bash, grep and sed (no jq): softvia-nicinfo --json writes one VI per line.
set -u

NICINFO=$1
TARGET=$2

T=$(mktemp -d "${TMPDIR:-/tmp}/nicinfo_test.XXXXXX") || exit 1
tpid=
cleanup() {
    if [ -n "$tpid" ]; then
        kill "$tpid" 2>/dev/null
        wait "$tpid" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/target.log "$T"/out "$T"/err; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):" >&2; cat "$f" >&2; }
    done
    exit 1
}

# Runs softvia-nicinfo; sets rc, stdout in $T/out, stderr in $T/err.
run() {
    "$NICINFO" "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "softvia-nicinfo $2: exit code $rc, expected $1"; }

# --- usage ---------------------------------------------------------------------------
run -h;                 expect_rc 0 "-h"
grep -q -- '--pid' "$T/out" || fail "-h does not describe --pid"
run --bogus;            expect_rc 2 "--bogus"
run --pid;              expect_rc 2 "--pid (no value)"
run --pid abc;          expect_rc 2 "--pid abc"
run --pid 0;            expect_rc 2 "--pid 0"
# This shell has no NIC open.
run --pid $$;           expect_rc 0 "--pid <shell>"
grep -qx 'no softvia NICs open' "$T/out" || fail "--pid <shell>: expected 'no softvia NICs open'"
run --pid $$ --json;    expect_rc 0 "--pid <shell> --json"
grep -q '"nics": \[\]' "$T/out" || fail "--pid <shell> --json: expected an empty nics list"

# --- a process with a NIC -------------------------------------------------------------
"$TARGET" "$T/ready" >"$T/target.log" 2>&1 &
tpid=$!
for ((i = 0; i < 300; i++)); do
    [ -s "$T/ready" ] && break
    kill -0 "$tpid" 2>/dev/null || { wait "$tpid"; fail "target exited early (status $?)"; }
    sleep 0.1
done
grep -qx ready "$T/ready" 2>/dev/null || fail "target not ready after 30 s"

run --pid "$tpid" --json
expect_rc 0 "--pid $tpid --json"
grep -q "^    \"pid\": $tpid,\$" "$T/out" || fail "--json: pid $tpid not reported"
[ "$(grep -c '^    "pid": ' "$T/out")" -eq 1 ] || fail "--json: expected exactly one NIC"
grep -q '^    "transport": "shm",$' "$T/out" || fail "--json: transport is not \"shm\""
grep -q '^    "progress": "inline",$' "$T/out" || fail "--json: progress is not \"inline\""
grep -q '^    "vis_open": 3,$' "$T/out" || fail "--json: expected 3 open VIs"
grep -Eq '^    "address": "0x[0-9a-f]+",$' "$T/out" || fail "--json: no hex address"
grep -Eq '^    "mtu": [1-9][0-9]*,$' "$T/out" || fail "--json: no mtu"
# The page is private to its user (a memfd is born 0777) and, being listed at all, is
# sealed against shrinking (softvia-nicinfo reads nothing else).
pfd=$(sed -n 's/^    "fd": \([0-9]*\),$/\1/p' "$T/out")
mode=$(stat -L -c %a "/proc/$tpid/fd/$pfd" 2>&1)
[ "$mode" = 600 ] || fail "status page (fd $pfd) has mode '$mode', expected 600"
grep -q "^    \"uid\": $(id -u),\$" "$T/out" || fail "--json: uid is not $(id -u)"
# The sending VI: CONNECTED, RR, >= 10 sends done.
sends=$(sed -n 's/.*"index": [0-9]*, "state": "CONNECTED", .*"reliability": "RR".*"sends_done": \([0-9]*\),.*/\1/p' "$T/out" |
        sort -n | tail -1)
[ -n "$sends" ] && [ "$sends" -ge 10 ] || fail "--json: no connected RR VI with >= 10 sends done (got '${sends}')"
recvs=$(sed -n 's/.*"state": "CONNECTED", .*"recvs_done": \([0-9]*\),.*/\1/p' "$T/out" | sort -n | tail -1)
[ -n "$recvs" ] && [ "$recvs" -ge 10 ] || fail "--json: no connected VI with >= 10 receives done (got '${recvs}')"
nic_sends=$(sed -n '/^    "counters"/s/.*"sends_done": \([0-9]*\),.*/\1/p' "$T/out")
[ -n "$nic_sends" ] && [ "$nic_sends" -ge 10 ] || fail "--json: NIC sends_done '${nic_sends}' < 10"
# The offloads and their counters: the target's 3 fetch-adds were applied by its NIC.
grep -q '^    "offloads": {.*"atomics": {"applied": 3, "replayed": 0, "refused": 0, "shortcut": 0}' "$T/out" ||
    fail "--json: the atomics offload line does not say 3 applied, 0 replayed, 0 refused, 0 shortcut"
grep -q '^    "offloads": {.*"steering": {}' "$T/out" || fail "--json: no steering offload line"
# The idle VI is hidden by default and listed with --idle.
[ "$(grep -c '"index": ' "$T/out")" -eq 2 ] || fail "--json: expected 2 VIs with traffic listed"
run --pid "$tpid" --json --idle
expect_rc 0 "--json --idle"
[ "$(grep -c '"index": ' "$T/out")" -eq 3 ] || fail "--json --idle: expected 3 VIs listed"
grep -q '"state": "IDLE"' "$T/out" || fail "--json --idle: idle VI not listed"

# Text output.
run --pid "$tpid"
expect_rc 0 "--pid $tpid"
grep -q "^pid $tpid" "$T/out" || fail "text: no 'pid $tpid' header"
grep -Eq $'^\ttransport:\t+shm$' "$T/out" || fail "text: no transport line"
grep -Eq $'^\tvis_open:\t+3 \\(1 without traffic' "$T/out" || fail "text: vis_open line wrong"
[ "$(grep -c $'^\tvi [0-9]*:' "$T/out")" -eq 2 ] || fail "text: expected 2 VI lines"
grep -q 'CONNECTED  RR' "$T/out" || fail "text: no CONNECTED RR VI"
grep -Eq $'^\toffload atomics:  applied 3  replayed 0  refused 0  shortcut 0$' "$T/out" || fail "text: atomics offload line wrong"

# Whole-host scan: finds the target too (other tests' NICs may show up as well).
run --json
expect_rc 0 "--json (all processes)"
grep -q "^    \"pid\": $tpid,\$" "$T/out" || fail "--json (all processes): pid $tpid not found"

echo "PASS"
