#!/usr/bin/env bash
# slurm_single_node.sh [BUILD_DIR] - programs that work under softvia-run, started by Slurm's
# srun instead (PMIx back end of boot/, through Slurm's mpi/pmix plugin), unchanged.
#
# Needs root. Brings up a throwaway one-node Slurm cluster on this host: a generated
# slurm.conf, munge key, state and spool directories, all in one temp dir; munged, slurmctld
# and slurmd as daemons pointed at it (SLURM_CONF, AuthInfo=socket=...), on free local ports,
# every address 127.0.0.1. Runs, each as its own job:
#   srun --mpi=pmix -n 2 launcher_boot_check 2 pmix
#   srun --mpi=pmix -n 2 am_pingpong
#   srun --mpi=pmix -n 2 sc_types
#   srun --mpi=pmix -n 2 sc_types, SPLITC_SHM=off
# then stops every daemon it started and removes the temp dir (trap on EXIT).
#
# Debian 12 packages: slurmd slurmctld (they pull slurm-client, slurm-wlm-basic-plugins,
# munge) and libpmix-dev: Debian's mpi_pmix_v4.so dlopen()s the unversioned
# /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so, which only libpmix-dev ships.
# Slurm's PMIx server (22.05.8, and upstream still) answers PMIx_Publish/Lookup/Unpublish
# PMIX_ERR_NOT_SUPPORTED: boot/ then carries put/get and names on the ranks' own data
# (docs/launching.md), which this script checks through boot_check and sc_types.
# Exit 0 all passed, 1 a program failed (its output is printed), 77 skipped (reason printed).
set -u
B=${1:-/work/main/build/release}
B=$(cd "$B" 2>/dev/null && pwd) || { echo "FAIL: no build directory ${1:-/work/main/build/release}"; exit 1; }
SLURMLIB=/usr/lib/x86_64-linux-gnu/slurm-wlm
PMIXLIB=/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs the job steps as root here)"
for c in slurmctld slurmd srun sinfo squeue scontrol; do
    command -v $c >/dev/null || skip "$c not installed (Debian: slurmd slurmctld)"
done
command -v munged >/dev/null || skip "munged not installed (Debian: munge), Slurm 22.05 authenticates with it"
for p in launcher/launcher_boot_check am/am_pingpong splitc/sc_types; do
    [ -x "$B/tests/$p" ] || { echo "FAIL: $B/tests/$p not built"; exit 1; }
done

T=$(mktemp -d /tmp/softvia-slurm.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
chmod 711 "$T" # munged: every directory above its socket must be searchable by all
export SLURM_CONF=$T/slurm.conf
# Nothing of a surrounding allocation or a site configuration may leak in.
unset SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID SLURM_NODELIST SLURM_NTASKS SLURM_NPROCS
unset SOFTVIA_RANK SOFTVIA_SIZE SOFTVIA_JOB_DIR PMIX_NAMESPACE PMIX_RANK PMIX_SERVER_URI2 PMIX_SERVER_URI3 PMIX_SERVER_URI4

pid_of() { [ -s "$1" ] && cat "$1" 2>/dev/null; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
stop_pid() { # stop_pid PID: TERM, up to 10 s, then KILL
    local p=$1 i
    alive "$p" || return 0
    kill -TERM "$p" 2>/dev/null
    for i in $(seq 100); do alive "$p" || return 0; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
}
cleanup() {
    local rc=$? i p
    trap - EXIT INT TERM
    if [ -s "$T/slurmctld.pid" ]; then
        # Cancel what is left (a timed-out srun's step), let slurmd's stepds end, then stop.
        local jobs; jobs=$(squeue -h -o %i 2>/dev/null)
        [ -n "$jobs" ] && scancel --quiet $jobs 2>/dev/null
        for i in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
    fi
    for p in slurmd slurmctld munged; do stop_pid "$(pid_of "$T/$p.pid")"; done
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

logs() { # the daemons' logs' tails, for a failure
    local f
    for f in "$T"/munged.log "$T"/slurmctld.log "$T"/slurmd.log; do
        # Their errors only (slurmd logs at debug level, for the note below).
        [ -s "$f" ] && { echo "--- errors in $(basename "$f"):"
            grep -E '(error|fatal|Error|Fatal):' "$f" | grep -vE 'job_state|resv_state|Trying backup state| debug: ' | tail -n "${1:-15}" | sed 's/^/    /'; }
    done
}
die() { echo "FAIL: $*"; logs 25; exit 1; }

ls "$SLURMLIB"/mpi_pmix*.so >/dev/null 2>&1 || skip "Slurm has no PMIx MPI plugin ($SLURMLIB/mpi_pmix*.so missing)"
[ -e "$PMIXLIB" ] || skip "$PMIXLIB missing: Slurm's mpi_pmix plugin dlopen()s it (Debian: libpmix-dev)"

free_port() { # free_port FROM: the first TCP port >= FROM nobody listens on
    local p=$1
    while ss -Hltn "sport = :$p" | grep -q .; do p=$((p + 1)); done
    echo $p
}
HOST=$(hostname -s)
NCPU=$(nproc)
CTLD_PORT=$(free_port $((16817 + RANDOM % 500)))
SLURMD_PORT=$(free_port $((CTLD_PORT + 1)))
SRUN_LO=$(free_port $((SLURMD_PORT + 1)))
mkdir -p "$T/state" "$T/spool" "$T/tmp"
chmod 755 "$T/spool" "$T/tmp"

# munge: a fresh key, its own socket; Slurm finds the socket through AuthInfo.
dd if=/dev/urandom of="$T/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge.key"
munged --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
    --log-file="$T/munged.log" --seed-file="$T/munged.seed" --num-threads=2 \
    || die "munged did not start"
for i in $(seq 50); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || die "munged made no socket"

cat >"$SLURM_CONF" <<EOF
ClusterName=softvia1n
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SrunPortRange=$SRUN_LO-$((SRUN_LO + 50))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
TmpFS=$T/tmp
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmctldDebug=info
SlurmdDebug=debug
PlugStackConfig=$T/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SchedulerType=sched/builtin
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=$NCPU RealMemory=100 State=UNKNOWN
PartitionName=softvia Nodes=$HOST Default=YES MaxTime=10 State=UP OverSubscribe=NO
EOF
: >"$T/plugstack.conf"

# srun's plugins, read with our slurm.conf (never without one: srun would then look for
# the controller through DNS SRV records).
MPIS=$(srun --mpi=list 2>&1 </dev/null)
echo "$MPIS" | grep -qw pmix || skip "srun has no pmix plugin: srun --mpi=list says: $(echo $MPIS)"

start=$(date +%s.%N)
slurmctld -c -i || die "slurmctld did not start"
for i in $(seq 50); do alive "$(pid_of "$T/slurmctld.pid")" && break; sleep 0.1; done
slurmd -N "$HOST" || die "slurmd did not start"
state=
for i in $(seq 150); do # up to 30 s
    state=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null)
    case $state in idle*) break ;; esac
    sleep 0.2
done
case $state in idle*) ;; *) die "node $HOST not idle after 30 s (sinfo: '${state}')" ;; esac
printf 'slurm up: node %s idle after %.1f s (ports %s/%s)\n' "$HOST" \
    "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" "$CTLD_PORT" "$SLURMD_PORT"

fail=0
run() { # run LABEL TIMEOUT CMD...: the command must exit 0 within TIMEOUT seconds
    local label=$1 t=$2; shift 2
    local out rc s=$(date +%s.%N)
    out=$(timeout -k 5 "$t" "$@" 2>&1 </dev/null); rc=$?
    printf '%-36s rc=%d  %.1f s\n' "$label" "$rc" "$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"
    if [ $rc -ne 0 ]; then
        echo "$out" | tail -40 | sed 's/^/    /'
        fail=1
    else
        echo "$out" | tail -3 | sed 's/^/    | /'
    fi
}
SRUN=(srun --mpi=pmix -N 1 -n 2 -p softvia --time=5 --kill-on-bad-exit=1)
run "srun boot_check -n 2" 90 "${SRUN[@]}" "$B/tests/launcher/launcher_boot_check" 2 pmix
run "srun am_pingpong -n 2" 120 "${SRUN[@]}" "$B/tests/am/am_pingpong"
run "srun sc_types -n 2" 120 "${SRUN[@]}" "$B/tests/splitc/sc_types"
# The same without the same-host path, whose start-up needs sv_boot_put/get (see below).
run "srun sc_types -n 2 SPLITC_SHM=off" 120 env SPLITC_SHM=off "${SRUN[@]}" "$B/tests/splitc/sc_types"

if [ $fail -eq 0 ]; then
    echo "PASS: slurm_single_node"
else
    logs 15
    # Slurm's PMIx server (mpi/pmix, pmixp_client_v2.c) answers PMIx_Publish, PMIx_Lookup
    # and PMIx_Unpublish with PMIX_ERR_NOT_SUPPORTED, up to its current release: boot/'s
    # put/get and names (which use them) cannot work under srun; allgather and barrier
    # (PMIx_Put/Commit/Fence/Get) do. slurmd logs each such call at SlurmdDebug=debug.
    n=$(grep -cE '_(publish|lookup|unpublish)_fn: .* called' "$T/slurmd.log" 2>/dev/null)
    [ "${n:-0}" -gt 0 ] && echo "note: the programs called PMIx_Publish/Lookup/Unpublish $n times; Slurm's" \
        "mpi/pmix answers them PMIX_ERR_NOT_SUPPORTED (sv_boot_put/get/publish_name fail with -EIO)"
    echo "FAIL: slurm_single_node"
fi
exit $fail
