#!/usr/bin/env bash
# shm_isolation.sh RUN SHM_API -- the same-host path's isolation (docs/shm.md, "Isolation").
#  1. A job of 3 processes holds its memory; a process of a second job and a process of
#     an unprivileged user (nobody, through setpriv) try to reach it: attaching its
#     segments is refused (another job), none of its processes keeps a memfd open (nothing
#     to open through /proc/<pid>/fd), and the kernel refuses the other user both
#     /proc/<pid>/fd and process_vm_readv.
#  2. A process of another user inside a job (one that the launcher's private files did
#     not stop: it keeps CAP_DAC_OVERRIDE): start-up is refused in every process, with a
#     message naming both users.
#  3. Nothing is left after the job ends, nor after one of its processes is killed with
#     SIGKILL: no new entry in /dev/shm or /tmp, no process mapping or holding a memfd of
#     the path.
# Needs root (a second user); exits 77 otherwise.
set -u
run=$1 prog=$2
[ "$(id -u)" = 0 ] || { echo "shm_isolation.sh: skipped: needs root (a second user, through setpriv)"; exit 77; }
command -v setpriv >/dev/null || { echo "shm_isolation.sh: skipped: no setpriv (util-linux)"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
work=$(mktemp -d /tmp/shm-iso.XXXXXX)
chmod 755 "$work" # nobody reads the victims' files
trap 'rm -rf "$work"' EXIT
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)

# What the path could leave behind.
entries() { { ls -A /dev/shm | sed 's|^|/dev/shm/|'; ls -A /tmp | grep -vx "$(basename "$work")" | sed 's|^|/tmp/|'; } | sort; }
# Processes of this test's jobs that still map or hold the path's memfds. Only ours: their
# command lines name $work (the victims' and intruders' arguments do), so another test's
# job running meanwhile (ctest -j, a developer's run) is not taken for a leak of ours.
memfd_users() {
    local f pid
    { grep -l "memfd:softvia-shm" /proc/[0-9]*/maps 2>/dev/null
      for f in /proc/[0-9]*/fd/*; do readlink "$f" 2>/dev/null | grep -q "memfd:softvia-shm" && echo "$f"; done
    } | while read -r f; do
        pid=${f#/proc/}; pid=${pid%%/*}
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$work" && echo "$f"
    done
}
check_clean() {  # what, the entries before
    local after new e pid
    after=$(entries)
    # Other tests may run meanwhile (ctest -j) and make files of their own. What may not
    # remain: anything named like the path's objects, and the directory of a job whose
    # launcher has gone (a live launcher's is another test's running job).
    new=""
    for e in $(comm -13 <(echo "$2") <(echo "$after")); do
        case $e in
            *softvia-shm* | *memfd*) new="$new $e" ;;
            */softvia-job.*)
                pid=${e##*/softvia-job.}
                pid=${pid%%.*}
                kill -0 "$pid" 2>/dev/null || new="$new $e"
                ;;
        esac
    done
    [ -z "$new" ] || bad "$1: left behind:$new"
    local users
    users=$(memfd_users)
    [ -z "$users" ] || bad "$1: still mapped or open: $users"
    [ -n "$new$users" ] || echo "ok: $1: nothing left in /dev/shm or /tmp, no process holds the path's memory"
}
start_victims() {  # the job of 3 in the background; waits until every process has written its file
    rm -f "$work"/victim.*
    "$run" -n 3 --timeout 60 "$prog" hold "$work/victim" >"$work/victim.out" 2>&1 &
    victim=$!
    for _ in $(seq 1 200); do
        [ -e "$work/victim.0" ] && [ -e "$work/victim.1" ] && [ -e "$work/victim.2" ] && return 0
        sleep 0.1
    done
    bad "the victim job did not start: $(cat "$work/victim.out")"
    return 1
}

# ---- 1 and 3: intruders, then the job's end --------------------------------------------
before=$(entries)
if start_victims; then
    out=$("$run" -n 1 --timeout 30 "$prog" intrude "$work/victim" 3 2>&1)
    rc=$?
    echo "$out" | sed 's/^/  second job: /'
    [ $rc -eq 0 ] || bad "the second job's intruder: status $rc"
    [ "$(grep -c 'attach refused: .*another job' <<<"$out")" = 3 ] || bad "the second job was not refused by every victim"
    [ "$(grep -c 'holds no memfd' <<<"$out")" = 3 ] || bad "a victim keeps a memfd open"
    out=$("${nobody[@]}" "$prog" intrude "$work/victim" 3 2>&1)
    rc=$?
    echo "$out" | sed 's/^/  user nobody: /'
    [ $rc -eq 0 ] || bad "nobody's intruder: status $rc"
    [ "$(grep -c 'attach refused: .*another job' <<<"$out")" = 3 ] || bad "nobody was not refused by every victim"
    [ "$(grep -c '/fd: Permission denied' <<<"$out")" = 3 ] || bad "nobody could open a victim's /proc/<pid>/fd"
    [ "$(grep -c 'process_vm_readv: Operation not permitted' <<<"$out")" = 3 ] || bad "nobody could read a victim's memory"
    touch "$work/victim.done"
    wait $victim
    rc=$?
    [ $rc -eq 0 ] || bad "the victim job: status $rc: $(cat "$work/victim.out")"
    check_clean "after the job's end" "$before"
fi

# ---- 3: a process killed ------------------------------------------------------------------
before=$(entries)
if start_victims; then
    pid1=$(cut -d' ' -f1 "$work/victim.1")
    kill -9 "$pid1"
    for _ in $(seq 1 150); do kill -0 $victim 2>/dev/null || break; sleep 0.1; done
    if kill -0 $victim 2>/dev/null; then
        bad "the job went on for 15 s after process 1 was killed"
        kill $victim
    fi
    wait $victim
    rc=$?
    [ $rc -ne 0 ] || bad "the job whose process 1 was killed exited with 0"
    echo "ok: process 1 (pid $pid1) killed: the job ended with status $rc"
    check_clean "after SIGKILL of a process" "$before"
fi

# ---- 2: another user inside the job ----------------------------------------------------
before=$(entries)
cat >"$work/as_nobody.sh" <<'EOF'
#!/bin/sh
# Rank 1 runs as nobody, keeping CAP_DAC_OVERRIDE: the launcher's files (root's, 0700 and
# 0600) would refuse it first otherwise; what must refuse it here is the path's own check.
if [ "$SOFTVIA_RANK" = 1 ]; then
    exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+dac_override --ambient-caps=+dac_override "$@"
fi
exec "$@"
EOF
chmod 755 "$work/as_nobody.sh"
out=$(timeout 60 "$run" -n 2 --timeout 40 "$work/as_nobody.sh" "$prog" all 2>&1)
rc=$?
echo "$out" | sed 's/^/  mixed users: /'
[ $rc -ne 0 ] && [ $rc -ne 124 ] || bad "a job with a process of another user: status $rc"
grep -q "runs as user 65534 and process 0 as user 0: the same-host path joins only processes of one user" <<<"$out" ||
    grep -q "runs as user 0 and process 1 as user 65534: the same-host path joins only processes of one user" <<<"$out" ||
    bad "the start-up error does not name both users"
check_clean "after the refused job" "$before"

[ $fail -eq 0 ] && echo "shm_isolation.sh: all held" && exit 0
exit 1
