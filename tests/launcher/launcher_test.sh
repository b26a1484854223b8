#!/usr/bin/env bash
# launcher_test.sh CASE SOFTVIA_RUN LAUNCHER_CHILD
# One ctest case per invocation; prints what went wrong and exits 1 on failure.
set -u

case_name=$1
RUN=$2
CHILD=$3

T=$(mktemp -d "${TMPDIR:-/tmp}/launcher_test.XXXXXX") || exit 1
ROOT=$T/root # job root, so we can check that nothing is left in it
mkdir -p "$ROOT" "$T/pids" "$T/out"
export SOFTVIA_JOB_ROOT=$ROOT
trap 'rm -rf "$T"' EXIT

fail() {
    echo "FAIL [$case_name]: $*" >&2
    for f in "$T"/stdout "$T"/stderr; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):" >&2; cat "$f" >&2; }
    done
    exit 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Runs softvia-run with the given arguments; sets rc and ms (elapsed).
run() {
    local t0
    t0=$(now_ms)
    "$RUN" "$@" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    ms=$(($(now_ms) - t0))
}

expect_rc() { [ "$rc" -eq "$1" ] || fail "exit code $rc, expected $1"; }
expect_faster() { [ "$ms" -lt "$1" ] || fail "took $ms ms, expected < $1 ms"; }
expect_root_empty() {
    [ -z "$(ls -A "$ROOT")" ] || fail "job root not empty: $(ls -A "$ROOT")"
}

# Alive = exists and is not a zombie (PID 1 in a container may not reap).
alive() {
    local st
    st=$(sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

expect_pids_dead() {
    local f n=0
    for f in "$T"/pids/pid.*; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        alive "$(cat "$f")" && fail "rank process $(cat "$f") ($(basename "$f")) survived"
    done
    [ "$n" -ge "${1:-1}" ] || fail "only $n pid files recorded"
}

wait_for_pids() { # wait until $1 pid files exist
    local i
    for ((i = 0; i < 1000; i++)); do
        [ "$(ls "$T/pids" | grep -c '^pid\.')" -ge "$1" ] && return 0
        sleep 0.01
    done
    fail "ranks did not start"
}

# ---- --hosts helpers ------------------------------------------------------------------

# The hosts cases need root (network namespaces); skip with the reason otherwise.
need_hosts() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: --hosts needs root (network namespaces and veth pairs)"
        exit 77
    fi
    "$RUN" -n 1 --hosts 1 true >"$T/stdout" 2>"$T/stderr"
    case $? in
    0) ;;
    77) echo "SKIP: $(cat "$T/stderr")"; exit 77 ;;
    *) fail "softvia-run --hosts 1 true does not work" ;;
    esac
}

# Network namespaces the launcher $1 holds besides its own (its namespace descriptors:
# the bridge's and the hosts'), appended to $T/netns. Waits until they are all open.
record_netns() {
    local want=$2 own i
    own=$(readlink /proc/$$/ns/net) # ours = the launcher's; it enters each new one briefly
    for ((i = 0; i < 500; i++)); do
        ls -l "/proc/$1/fd" 2>/dev/null | grep -o 'net:\[[0-9]*\]' | sort -u | grep -vxF "$own" >"$T/netns.now"
        [ "$(wc -l <"$T/netns.now")" -ge "$want" ] && { cat "$T/netns.now" >>"$T/netns"; return; }
        sleep 0.01
    done
    fail "the launcher never held $want network namespaces"
}

# Nothing the launcher $1 made may be left: no process or descriptor in its namespaces,
# none of them mounted, no svh/svb interface or /run/netns entry with its pid.
# (A namespace that nothing refers to is gone: the kernel frees it.)
expect_hosts_gone() {
    local lpid=$1 i left
    [ -s "$T/netns" ] || fail "no namespaces were recorded"
    for ((i = 0; i < 300; i++)); do
        # One find for every process's namespace and descriptors (a loop of readlinks
        # takes seconds on a busy machine).
        left=$( (find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -type l -printf '%l\n'
            grep -o 'net:\[[0-9]*\]' /proc/self/mountinfo) 2>/dev/null | grep -xFf "$T/netns" | sort -u)
        [ -z "$left" ] && break
        sleep 0.01
    done
    [ -z "$left" ] || fail "namespaces still in use after the launcher exited: $left"
    ls /run/netns 2>/dev/null | grep -q "sv[hb]$lpid-" && fail "/run/netns has entries of launcher $lpid"
    ip -o link show 2>/dev/null | grep -q "sv[hb]r\?$lpid" && fail "root namespace has interfaces of launcher $lpid"
    return 0
}

# Starts the launcher in the background (arguments: hosts, launcher options, --,
# program and its arguments); sets lpid and records its namespaces (bridge + hosts).
# The ranks wait at a gate until then, so a short job cannot end before it is seen.
start_hosts() {
    local hosts=$1 opts=()
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    : >"$T/netns"
    rm -f "$T/go"
    "$RUN" "${opts[@]}" -- sh -c 'until [ -e "$0" ]; do sleep 0.01; done; exec "$@"' "$T/go" "$@" \
        >"$T/stdout" 2>"$T/stderr" &
    lpid=$!
    record_netns "$lpid" $((hosts + 1))
    touch "$T/go"
}

case $case_name in
child_failure)
    # Rank 2 exits 3 once all ranks run; the others sleep forever.
    run -n 4 "$CHILD" fail "$T/pids" 2 3
    expect_rc 3
    expect_faster 5000
    expect_pids_dead 4
    expect_root_empty
    ;;
term_ignored)
    # The others ignore SIGTERM: the launcher must SIGKILL them after ~2 s.
    run -n 3 "$CHILD" fail "$T/pids" 0 5 noterm
    expect_rc 5
    [ "$ms" -ge 1800 ] || fail "SIGKILL came after $ms ms, expected a ~2 s grace period"
    expect_faster 8000
    expect_pids_dead 3
    expect_root_empty
    ;;
child_signal)
    # A rank killed by SIGUSR1 (10) gives 128+10.
    run -n 3 "$CHILD" signal 1 10
    expect_rc 138
    expect_faster 5000
    expect_root_empty
    ;;
timeout)
    run -n 3 --timeout 1 "$CHILD" park "$T/pids"
    expect_rc 124
    [ "$ms" -ge 900 ] || fail "timed out after only $ms ms"
    expect_faster 5000
    grep -qx 'softvia-run: timeout after 1 s' "$T/stderr" || fail "no timeout message"
    [ ! -s "$T/stdout" ] || fail "unexpected stdout"
    expect_pids_dead 3
    expect_root_empty
    ;;
timeout_not_reached)
    run -n 2 --timeout 30 "$CHILD" args ok
    expect_rc 0
    [ "$(cat "$T/stdout")" = "$(printf 'ok\nok')" ] || fail "bad output"
    [ ! -s "$T/stderr" ] || fail "unexpected stderr"
    ;;
jobdir)
    run -n 3 "$CHILD" env "$T/out"
    expect_rc 0
    [ ! -s "$T/stdout" ] && [ ! -s "$T/stderr" ] || fail "launcher printed something on success"
    dirs=$(cat "$T"/out/jobdir.* | sort -u)
    [ "$(ls "$T/out" | wc -l)" -eq 3 ] || fail "not every rank reported"
    [ "$(echo "$dirs" | wc -l)" -eq 1 ] || fail "ranks disagree on the job dir: $dirs"
    case $dirs in "$(realpath "$ROOT")"/softvia-job.*) ;; *) fail "job dir $dirs not in root" ;; esac
    [ ! -e "$dirs" ] || fail "job dir $dirs still exists"
    expect_root_empty
    # Default root /dev/shm.
    unset SOFTVIA_JOB_ROOT
    rm -f "$T"/out/*
    run -n 2 "$CHILD" env "$T/out"
    expect_rc 0
    d=$(cat "$T/out/jobdir.0")
    case $d in /dev/shm/softvia-job.*) ;; *) fail "default job dir is $d" ;; esac
    [ ! -e "$d" ] || fail "job dir $d still exists"
    ;;
bad_args)
    check_usage() {
        run "$@"
        [ "$rc" -eq 2 ] || fail "'$*': exit code $rc, expected 2"
        grep -q '^usage: softvia-run' "$T/stderr" || fail "'$*': no usage line"
        [ ! -e "$T/ran" ] || fail "'$*': the program ran"
        expect_root_empty
    }
    check_usage -n 0 touch "$T/ran"
    check_usage -n 4097 touch "$T/ran"
    check_usage -n -1 touch "$T/ran"
    check_usage -n abc touch "$T/ran"
    check_usage -n 2x touch "$T/ran"
    check_usage -n 4
    check_usage -n 4 --
    check_usage touch "$T/ran"
    check_usage -n
    check_usage --bogus -n 2 touch "$T/ran"
    check_usage -n 2 -x touch "$T/ran"
    check_usage -n 2 --timeout touch "$T/ran"
    check_usage -n 2 --timeout 0 touch "$T/ran"
    check_usage -n 2 --timeout -3 touch "$T/ran"
    check_usage -n 2 --timeout abc touch "$T/ran"
    check_usage
    run --help
    expect_rc 0
    grep -q '^usage: softvia-run' "$T/stdout" || fail "--help prints no usage"
    ;;
exec_failure)
    run -n 2 "$T/no-such-program"
    expect_rc 127
    grep -q "cannot execute" "$T/stderr" || fail "no exec error message"
    expect_root_empty
    ;;
args)
    # Options after the program name belong to the program.
    run -n 1 -- "$CHILD" args -n 5 --timeout "two words"
    expect_rc 0
    [ "$(cat "$T/stdout")" = "$(printf -- '-n\n5\n--timeout\ntwo words')" ] || fail "args mangled"
    ;;
tag_output)
    run -n 3 --tag-output "$CHILD" echo
    expect_rc 0
    want_out=$(for r in 0 1 2; do printf '[%d] out %d line1\n[%d] out %d line2\n[%d] partial %d\n' \
        $r $r $r $r $r $r; done | sort)
    [ "$(sort "$T/stdout")" = "$want_out" ] || fail "tagged stdout wrong"
    [ "$(sort "$T/stderr")" = "$(printf '[0] err 0\n[1] err 1\n[2] err 2')" ] || fail "tagged stderr wrong"
    # Per rank, line order is kept.
    for r in 0 1 2; do
        [ "$(grep "^\[$r\]" "$T/stdout" | head -1)" = "[$r] out $r line1" ] || fail "order, rank $r"
    done
    # Without the flag the output is untouched.
    run -n 2 "$CHILD" echo
    expect_rc 0
    grep -q '^\[' "$T/stdout" && fail "untagged output has tags"
    # (Untagged lines of the two ranks may interleave, so only count pieces.)
    [ "$(grep -o 'line1' "$T/stdout" | wc -l)" -eq 2 ] || fail "untagged stdout wrong"
    ;;
pin)
    run -n 4 --pin "$CHILD" pin
    expect_rc 0
    # Expected CPU for rank i: the (i mod k)-th CPU we may run on.
    mapfile -t cpus < <(awk '/^Cpus_allowed_list/ {
        n = split($2, part, ",")
        for (i = 1; i <= n; i++) {
            m = split(part[i], r, "-"); lo = r[1] + 0; hi = (m > 1 ? r[2] : r[1]) + 0
            for (c = lo; c <= hi; c++) print c
        } }' /proc/self/status)
    [ "${#cpus[@]}" -ge 1 ] || fail "cannot read the allowed CPU list"
    for r in 0 1 2 3; do
        want="$r ${cpus[$((r % ${#cpus[@]}))]}"
        grep -qx "$want" "$T/stdout" || fail "rank $r not pinned as '$want': $(cat "$T/stdout")"
    done
    # Without --pin nobody is pinned (unless we only have one CPU anyway).
    if [ "${#cpus[@]}" -gt 1 ]; then
        run -n 2 "$CHILD" pin
        [ "$(grep -c ' many$' "$T/stdout")" -eq 2 ] || fail "ranks pinned without --pin"
    fi
    ;;
sigterm)
    # SIGTERM to the launcher is forwarded; it then dies of SIGTERM itself.
    t0=$(now_ms)
    "$RUN" -n 3 "$CHILD" park "$T/pids" >"$T/stdout" 2>"$T/stderr" &
    lpid=$!
    wait_for_pids 3
    kill -TERM "$lpid"
    wait "$lpid"
    rc=$?
    ms=$(($(now_ms) - t0))
    expect_rc 143
    expect_faster 5000
    expect_pids_dead 3
    expect_root_empty
    ;;
launcher_killed)
    # SIGKILL to the launcher: PR_SET_PDEATHSIG must take the ranks down.
    "$RUN" -n 3 "$CHILD" park-noterm "$T/pids" >"$T/stdout" 2>"$T/stderr" &
    lpid=$!
    wait_for_pids 3
    kill -KILL "$lpid"
    wait "$lpid" 2>/dev/null
    for ((i = 0; i < 300; i++)); do
        left=0
        for f in "$T"/pids/pid.*; do alive "$(cat "$f")" && left=1; done
        [ $left -eq 0 ] && break
        sleep 0.01
    done
    expect_pids_dead 3
    ;;
launcher_killed_leftovers)
    # SIGKILL to the launcher leaves its job directory behind (nothing runs to remove
    # it); the next softvia-run removes it, and only directories whose launcher is gone
    # and that belong to this user.
    "$RUN" -n 2 "$CHILD" park-noterm "$T/pids" >"$T/stdout" 2>"$T/stderr" &
    lpid=$!
    wait_for_pids 2
    kill -KILL "$lpid"
    wait "$lpid" 2>/dev/null
    for ((i = 0; i < 300; i++)); do
        left=0
        for f in "$T"/pids/pid.*; do alive "$(cat "$f")" && left=1; done
        [ $left -eq 0 ] && break
        sleep 0.01
    done
    expect_pids_dead 2 # PR_SET_PDEATHSIG
    dead_dirs=$(ls -A "$ROOT")
    # A live launcher's directory must survive the clean-up.
    rm -f "$T"/pids/pid.*
    "$RUN" -n 1 "$CHILD" park "$T/pids" >"$T/stdout.live" 2>"$T/stderr.live" &
    live=$!
    wait_for_pids 1
    live_dir=$(ls -A "$ROOT" | grep -vxF "$dead_dirs")
    [ "$(echo "$live_dir" | wc -l)" -eq 1 ] && [ -n "$live_dir" ] || fail "cannot tell the live launcher's directory: '$live_dir'"
    # Directories the clean-up must leave alone: not softvia-run's names, a symlink,
    # a plain file, and (run as root) another user's directory of a dead launcher.
    mkdir "$ROOT/softvia-job.x" "$ROOT/softvia-job.999999999.0123456789abcde" "$T/target"
    ln -s "$T/target" "$ROOT/softvia-job.999999998.0123456789abcdef"
    touch "$ROOT/softvia-job.999999997.0123456789abcdef"
    keep=(softvia-job.x softvia-job.999999999.0123456789abcde softvia-job.999999998.0123456789abcdef
          softvia-job.999999997.0123456789abcdef)
    if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
        mkdir -p "$ROOT/softvia-job.999999996.0123456789abcdef/names"
        chown -R nobody "$ROOT/softvia-job.999999996.0123456789abcdef"
        touch -d '1 hour ago' "$ROOT/softvia-job.999999996.0123456789abcdef"
        keep+=(softvia-job.999999996.0123456789abcdef)
    else
        echo "note: not root: no other user's directory to leave alone"
    fi
    # Ours, of a launcher that died before it locked its directory (or of an older
    # softvia-run): removed once its launcher's pid is gone and it is a minute old.
    mkdir -p "$ROOT/softvia-job.999999995.0123456789abcdef/kv" "$ROOT/softvia-job.999999994.0123456789abcdef"
    touch -d '1 hour ago' "$ROOT/softvia-job.999999995.0123456789abcdef"
    keep+=(softvia-job.999999994.0123456789abcdef) # too young: may be being made now
    run -n 1 true
    expect_rc 0
    for d in $dead_dirs softvia-job.999999995.0123456789abcdef; do
        [ ! -e "$ROOT/$d" ] || fail "the next softvia-run left $d (its launcher is gone)"
    done
    [ -d "$ROOT/$live_dir" ] || fail "the next softvia-run removed the live launcher's directory $live_dir"
    for d in "${keep[@]}"; do
        [ -e "$ROOT/$d" ] || [ -L "$ROOT/$d" ] || fail "the next softvia-run removed $d"
    done
    [ -d "$T/target" ] || fail "the clean-up followed a symlink"
    kill -TERM "$live"
    wait "$live"
    [ ! -e "$ROOT/$live_dir" ] || fail "the live launcher did not remove its directory on SIGTERM"
    ;;
hosts_bad_args)
    check_usage() {
        run "$@"
        [ "$rc" -eq 2 ] || fail "'$*': exit code $rc, expected 2"
        grep -q '^usage: softvia-run' "$T/stderr" || fail "'$*': no usage line"
        [ ! -e "$T/ran" ] || fail "'$*': the program ran"
    }
    check_usage -n 2 --hosts 0 touch "$T/ran"
    check_usage -n 2 --hosts 257 touch "$T/ran"
    check_usage -n 2 --hosts x touch "$T/ran"
    check_usage -n 2 --mtu 1400 touch "$T/ran"
    check_usage -n 2 --hosts 2 --mtu 67 touch "$T/ran"
    check_usage -n 2 --hosts 2 --mtu 70000 touch "$T/ran"
    check_usage -n 2 --at 5:1:down touch "$T/ran"
    check_usage -n 2 --hosts 2 --at 5:2:down touch "$T/ran"
    check_usage -n 2 --hosts 2 --at 5:1:sideways touch "$T/ran"
    check_usage -n 2 --hosts 2 --at 5:1 touch "$T/ran"
    check_usage -n 2 --hosts 2 --at x:1:up touch "$T/ran"
    check_usage -n 2 --hosts 2 --at -5:1:up touch "$T/ran"
    check_usage -n 2 --hosts 2 --exec-at 5:1: touch "$T/ran"
    check_usage -n 2 --hosts 2 --at-from k touch "$T/ran"
    check_usage -n 2 --hosts 2 --at 5:1:up --at-from a/b touch "$T/ran"
    run --help
    expect_rc 0
    grep -q -- '--hosts H' "$T/stdout" || fail "--help does not describe --hosts"
    grep -q -- '--at MS:HOST:down|up' "$T/stdout" || fail "--help does not describe --at"
    ;;
hosts_noroot)
    # Without privileges: exit 77 and say why.
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to drop to nobody"; exit 77; }
    run -n 1 true # builds the command line the same way, as root, to compare
    setpriv --reuid=65534 --regid=65534 --clear-groups env SOFTVIA_JOB_ROOT=/dev/shm \
        "$RUN" -n 2 --hosts 2 touch "$T/ran" >"$T/stdout" 2>"$T/stderr"
    rc=$?
    expect_rc 77
    grep -q 'needs root for --hosts' "$T/stderr" || fail "no 'needs root for --hosts' message"
    [ ! -e "$T/ran" ] || fail "the program ran"
    ;;
hosts2 | hosts3)
    need_hosts
    h=${case_name#hosts}
    n=$((h * 2 + 1))
    mtu=1500 mtu_opt=() # the default; 3 hosts try --mtu and %i/%a in SOFTVIA_DEVICE
    unset SOFTVIA_DEVICE
    [ "$h" -eq 3 ] && mtu=9000 mtu_opt=(--mtu 9000) && export SOFTVIA_DEVICE='t:iface=%i,addr=%a,keep=%z'
    start_hosts "$h" -n "$n" --hosts "$h" "${mtu_opt[@]}" -- "$CHILD" hostcheck "$T/out"
    wait "$lpid"
    rc=$?
    expect_rc 0
    [ "$(ls "$T/out" | wc -l)" -eq "$n" ] || fail "not every rank reported"
    # Ranks on one host share its namespace; different hosts have different ones.
    [ "$(cat "$T"/out/ns.* | sort -u | wc -l)" -eq "$h" ] || fail "not $h namespaces: $(cat "$T"/out/ns.*)"
    [ "$(cat "$T"/out/ns.* | cut -d' ' -f2 | sort -u | wc -l)" -eq "$h" ] || fail "hosts share a namespace"
    [ "$(cut -d' ' -f3 "$T"/out/ns.* | sort -u)" = "$mtu" ] || fail "MTU is not $mtu: $(cat "$T"/out/ns.*)"
    unset SOFTVIA_DEVICE
    expect_hosts_gone "$lpid"
    expect_root_empty
    # UDP between the hosts, over their 198.18 addresses.
    start_hosts "$h" -n "$n" --hosts "$h" --mtu 9000 -- "$CHILD" udpmesh
    wait "$lpid"
    rc=$?
    expect_rc 0
    [ "$(grep -c 'answered' "$T/stdout")" -eq "$n" ] || fail "not every rank exchanged datagrams"
    expect_hosts_gone "$lpid"
    expect_root_empty
    ;;
hosts_two_launchers)
    # Two jobs at once, each with its own bridge: the same addresses never meet.
    need_hosts
    "$RUN" -n 4 --hosts 2 "$CHILD" udpmesh >"$T/out/a" 2>&1 &
    a=$!
    "$RUN" -n 4 --hosts 2 "$CHILD" udpmesh >"$T/out/b" 2>&1 &
    b=$!
    wait "$a" || fail "the first job failed: $(cat "$T/out/a")"
    wait "$b" || fail "the second job failed: $(cat "$T/out/b")"
    [ "$(cat "$T/out/a" "$T/out/b" | grep -c answered)" -eq 8 ] || fail "not every rank of both jobs exchanged datagrams"
    expect_root_empty
    ;;
hosts_failure)
    need_hosts
    start_hosts 2 -n 4 --hosts 2 -- "$CHILD" fail "$T/pids" 1 3
    wait "$lpid"
    rc=$?
    expect_rc 3
    expect_pids_dead 4
    expect_hosts_gone "$lpid"
    expect_root_empty
    ;;
hosts_timeout)
    need_hosts
    start_hosts 2 -n 2 --hosts 2 --timeout 1 -- "$CHILD" park "$T/pids"
    wait "$lpid"
    rc=$?
    expect_rc 124
    expect_pids_dead 2
    expect_hosts_gone "$lpid"
    expect_root_empty
    ;;
hosts_sigterm)
    need_hosts
    start_hosts 2 -n 3 --hosts 2 -- "$CHILD" park "$T/pids"
    wait_for_pids 3
    kill -TERM "$lpid"
    wait "$lpid"
    rc=$?
    expect_rc 143
    expect_pids_dead 3
    expect_hosts_gone "$lpid"
    expect_root_empty
    ;;
hosts_sigkill)
    # SIGKILL: the launcher cleans nothing up itself; its ranks die of PR_SET_PDEATHSIG
    # and its namespace descriptors close, so the kernel removes everything. Then a new
    # launcher starts and runs normally.
    need_hosts
    start_hosts 2 -n 3 --hosts 2 --exec-at 0:1:'exec sleep 1000' -- "$CHILD" park-noterm "$T/pids"
    wait_for_pids 3
    kill -KILL "$lpid"
    wait "$lpid" 2>/dev/null
    for ((i = 0; i < 300; i++)); do
        left=0
        for f in "$T"/pids/pid.*; do alive "$(cat "$f")" && left=1; done
        [ $left -eq 0 ] && break
        sleep 0.01
    done
    expect_pids_dead 3
    expect_hosts_gone "$lpid"
    rm -rf "${ROOT:?}"/* # the SIGKILLed launcher could not remove its job directory
    start_hosts 2 -n 2 --hosts 2 -- "$CHILD" udpmesh
    wait "$lpid"
    rc=$?
    expect_rc 0
    expect_hosts_gone "$lpid"
    expect_root_empty
    ;;
hosts_linkdown)
    # Host 1's cable is pulled 500 ms into the echo stream and put back at 1500 ms:
    # echoes stop in between and resume after.
    need_hosts
    start_hosts 2 -n 2 --hosts 2 --at-from flow-start --at 500:1:down --at 1500:1:up \
        -- "$CHILD" flow 500 1500 2500
    wait "$lpid"
    rc=$?
    expect_rc 0
    grep -q '^flow: ' "$T/stdout" || fail "no flow summary"
    expect_hosts_gone "$lpid"
    # --exec-at runs in the host's namespace with its variables; a failure fails the job.
    run -n 1 --hosts 2 --exec-at 0:1:'[ "$SOFTVIA_HOST" = 1 ] && ip -o addr show dev "$SOFTVIA_HOST_IFACE" | grep -q "inet $SOFTVIA_HOST_ADDR/" && touch '"$T/exec-ok" \
        sleep 1
    expect_rc 0
    [ -e "$T/exec-ok" ] || fail "--exec-at did not run in host 1's namespace"
    run -n 1 --hosts 2 --exec-at 0:0:'exit 3' sleep 5
    expect_rc 125
    grep -q "exited with 3" "$T/stderr" || fail "no message for the failing --exec-at command"
    expect_faster 4000
    expect_root_empty
    ;;
*)
    echo "unknown case $case_name" >&2
    exit 2
    ;;
esac
exit 0
