#!/usr/bin/env bash
# nicinfo_hostile_test.sh NICINFO TARGET HOSTILE [RUNS]
# softvia-nicinfo against fake status pages (nicinfo_hostile: pages whose size keeps
# changing, random and lying content) while a real NIC (nicinfo_target) is open:
# every run must exit 0 (no SIGBUS, no crash) and report the real NIC correctly.
# Run as root, a second hostile process runs as user nobody (the case of a root
# softvia-nicinfo and an unprivileged user's fake page), and softvia-nicinfo also runs
# as nobody: it must then list none of root's NICs.
set -u

NICINFO=$1
TARGET=$2
HOSTILE=$3
RUNS=${4:-150}

T=$(mktemp -d "${TMPDIR:-/tmp}/nicinfo_hostile.XXXXXX") || exit 1
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/*.log "$T"/out "$T"/err; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):" >&2; head -c 4000 "$f" >&2; }
    done
    exit 1
}

# start NAME CMD...: runs CMD in the background, waits for it to write $T/NAME.ready.
start() {
    local name=$1 i
    shift
    "$@" >"$T/$name.log" 2>&1 &
    pids+=($!)
    for ((i = 0; i < 300; i++)); do
        [ -s "$T/$name.ready" ] && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || fail "$name exited early"
        sleep 0.1
    done
    fail "$name not ready after 30 s"
}

as_nobody=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    "${as_nobody[@]}" true 2>/dev/null || as_nobody=(setpriv --reuid=nobody --regid=nobody --clear-groups)
    "${as_nobody[@]}" true 2>/dev/null || as_nobody=()
fi

start target "$TARGET" "$T/target.ready"
tpid=${pids[-1]}
start hostile "$HOSTILE" "$T/hostile.ready" 1
hpid=${pids[-1]}
if [ ${#as_nobody[@]} -gt 0 ]; then
    mkdir "$T/nobody" && chmod 0777 "$T/nobody" && chmod 0755 "$T" || fail "cannot make a directory for nobody"
    "${as_nobody[@]}" "$HOSTILE" "$T/nobody/ready" 2 >"$T/hostile_nobody.log" 2>&1 &
    pids+=($!)
    for ((i = 0; i < 300; i++)); do
        [ -s "$T/nobody/ready" ] && break
        sleep 0.1
    done
    [ -s "$T/nobody/ready" ] || fail "hostile process of user nobody not ready"
    echo "a second hostile process runs as user nobody"
else
    echo "note: not root (or no setpriv/nobody): no hostile process of another user"
fi

# check_run WHAT ARGS...: one softvia-nicinfo run; fails on a crash or a bad exit code.
check_run() {
    local what=$1
    shift
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" -lt 128 ] || fail "$what: softvia-nicinfo killed by signal $((rc - 128)) (run $run)"
    [ "$rc" -eq 0 ] || fail "$what: exit code $rc (run $run)"
}

# The real NIC, as nicinfo_target opened it: exactly one entry for its pid, on shm,
# with its 3 VIs.
check_target() {
    awk -v p="$tpid," '/^    "pid": /{cur=$2} cur == p && /^    "(transport|vis_open)": /{print $1 $2}' \
        "$T/out" >"$T/target"
    printf '"transport":"shm",\n"vis_open":3,\n' | cmp -s - "$T/target" ||
        fail "$1: the real NIC of pid $tpid is not reported as it is (run $run): $(tr '\n' ' ' <"$T/target")"
}

for ((run = 0; run < RUNS; run++)); do
    if ((run % 2 == 0)); then
        check_run "--json (all processes)" "$NICINFO" --json --idle
        check_target "--json (all processes)"
    else
        check_run "--pid $hpid" "$NICINFO" --pid "$hpid" --json --idle
    fi
    # A fake page is never listed with a size or counts it does not have: any NIC
    # listed for the hostile process has at most max_vi VIs, and max_vi fits the page.
    if grep -q "^    \"pid\": $hpid," "$T/out"; then
        awk '/"max_vi": /{m=$2+0} /"vis_open": /{ if ($2+0 > m) exit 1 }' "$T/out" ||
            fail "a listed page has more VIs than its max_vi (run $run)"
    fi
done
echo "$RUNS runs as $(id -un): no crash, the real NIC reported every time"

if [ ${#as_nobody[@]} -gt 0 ]; then
    for ((run = 0; run < 20; run++)); do
        check_run "as nobody" "${as_nobody[@]}" "$NICINFO" --json --idle
        grep -q "^    \"pid\": $tpid," "$T/out" && fail "run as nobody, softvia-nicinfo listed root's NIC (pid $tpid)"
    done
    echo "20 runs as nobody: no crash, root's NIC not listed"
fi
echo "PASS"
