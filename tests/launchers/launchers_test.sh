#!/usr/bin/env bash
# launchers_test.sh CASE BUILD_DIR - programs that work under softvia-run, started by
# Open MPI's mpirun instead (PMIx back end of boot/), unchanged:
#   mpirun_local   on this host: boot_check (2, 4), vipl_bench, AM SPMD programs (am_reduce
#                  on 4, am_pingpong), a Split-C conformance program (2, 4; shm, am, via-rel),
#                  multi-process VIPL tests (mp_names, mp_stream, mp_alltoall on 4), an
#                  application (cg, verified)
#   netns_udp      2 processes on two "hosts" (network namespaces joined by a veth pair),
#   netns_dpdk     each with a private /tmp and /dev/shm: nothing shared but the wire
#   lies           an incomplete PMIx environment, and a peer that never joins: clear
#                  errors within bounded time
set -u
CASE=$1
B=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (Debian: openmpi-bin)"; exit 77; }
# Nothing of a softvia-run job around this one may reach the ranks (it would win over PMIx).
MPIRUN=(env -u SOFTVIA_RANK -u SOFTVIA_SIZE -u SOFTVIA_JOB_DIR
        mpirun --allow-run-as-root --oversubscribe --bind-to none)
fail=0

# run LABEL TIMEOUT PATTERN CMD...: the command must exit 0 within TIMEOUT seconds and
# print a line matching PATTERN (the rank and size it ran as: a job of N, not N jobs of
# one); PATTERN "-" for programs that check that themselves (boot_check, boot_lies).
run() {
    local label=$1 t=$2 pattern=$3; shift 3
    local out rc start=$(date +%s.%N)
    out=$(timeout -k 5 "$t" "$@" 2>&1); rc=$?
    printf '%-44s rc=%d  %.1f s\n' "$label" "$rc" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')"
    if [ $rc -ne 0 ]; then
        echo "$out" | tail -20 | sed 's/^/    /'
        fail=1
    elif [ "$pattern" != - ] && ! echo "$out" | grep -Eq -- "$pattern"; then
        echo "    no line matches '$pattern' in:"
        echo "$out" | tail -10 | sed 's/^/    /'
        fail=1
    elif [ "$pattern" != - ]; then
        echo "$out" | grep -E -- "$pattern" | head -1 | sed 's/^/    | /'
    fi
    return 0
}

case $CASE in
mpirun_local)
    run "boot_check -np 2" 60 - "${MPIRUN[@]}" -np 2 "$B/tests/launcher/launcher_boot_check" 2 pmix
    run "boot_check -np 4" 60 - "${MPIRUN[@]}" -np 4 "$B/tests/launcher/launcher_boot_check" 4 pmix
    run "vipl_bench -np 2" 90 '^stream +4096' "${MPIRUN[@]}" -np 2 "$B/tools/bench/vipl_bench" --sizes 4,4096 --iters 2000 --msgs 5000
    run "am_reduce -np 4" 90 'am_reduce\[rank 0/4\]: PASS' "${MPIRUN[@]}" -np 4 "$B/tests/am/am_reduce" --count 300
    run "am_pingpong -np 2" 90 'am_pingpong\[rank 0/2\]: PASS' "${MPIRUN[@]}" -np 2 "$B/tests/am/am_pingpong"
    run "sc_types -np 2" 90 'process 0 of 2' "${MPIRUN[@]}" -np 2 "$B/tests/splitc/sc_types"
    run "sc_types -np 4" 90 'process 0 of 4' "${MPIRUN[@]}" -np 4 "$B/tests/splitc/sc_types"
    run "sc_types -np 2 SPLITC_SHM=off" 90 'process 0 of 2' "${MPIRUN[@]}" -np 2 -x SPLITC_SHM=off "$B/tests/splitc/sc_types"
    run "mp_names -np 2" 60 'mp_names\[rank 0/2\]: PASS' "${MPIRUN[@]}" -np 2 "$B/tests/multiproc/mp_names"
    run "mp_stream RD -np 2" 90 'mp_stream\[rank 0/2\]: PASS' "${MPIRUN[@]}" -np 2 "$B/tests/multiproc/mp_stream" --rel RD --progress inline
    run "mp_alltoall -np 4" 90 'mp_alltoall\[rank 0/4\]: PASS' "${MPIRUN[@]}" -np 4 "$B/tests/multiproc/mp_alltoall" --progress inline
    run "sc_types -np 2 via-rel SPLITC_SHM=off" 90 'process 0 of 2' "${MPIRUN[@]}" -np 2 -x SPLITC_SHM=off -x SPLITC_BACKEND=via-rel \
        "$B/tests/splitc/sc_types"
    # splitc_exit ends every process by _exit: disconnected first, or mpirun calls it a crash.
    run "sc_exit 0 -np 2" 60 'calls splitc_exit' "${MPIRUN[@]}" -np 2 "$B/tests/splitc/sc_exit" 0
    run "cg --size small -np 2" 90 'procs=2 .*verified=yes' "${MPIRUN[@]}" -np 2 "$B/apps/cg" --size small
    ;;
netns_udp | netns_dpdk)
    [ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
    . "$HERE/netns_hosts.sh"
    netns_up "$B" || { echo "FAIL: could not create the namespaces"; exit 1; }
    if [ "$CASE" = netns_udp ]; then dev=udp; else dev="dpdk:vdev=net_af_packet0;iface=sv0"; fi
    # mpirun runs on host A with a private /tmp and /dev/shm too; B's side is started by
    # the agent. Only -x variables reach B: nothing of A's environment or files.
    ACROSS=("${PRIVATE[@]}" "${MPIRUN[@]}" --host "$HOST_A:1,$HOST_B:1" -np 2 --mca plm_rsh_agent "$AGENT"
        -x SOFTVIA_DEVICE="$dev" -x SOFTVIA_PROGRESS=inline)
    run "boot_check across ($dev)" 60 - "${ACROSS[@]}" "$B/tests/launcher/launcher_boot_check" 2 pmix
    run "vipl_bench across ($dev)" 120 '^stream +4096' "${ACROSS[@]}" "$B/tools/bench/vipl_bench" --sizes 4,4096 --iters 2000 --msgs 5000
    run "am_pingpong across ($dev)" 120 'am_pingpong\[rank 0/2\]: PASS' "${ACROSS[@]}" "$B/tests/am/am_pingpong"
    run "sc_types across ($dev)" 120 'process 0 of 2' "${ACROSS[@]}" "$B/tests/splitc/sc_types"
    run "mp_names across ($dev)" 60 'mp_names\[rank 0/2\]: PASS' "${ACROSS[@]}" "$B/tests/multiproc/mp_names"
    ;;
lies)
    run "PMIX_NAMESPACE without PMIX_RANK" 30 - env -u SOFTVIA_RANK -u SOFTVIA_SIZE "$B/tests/launchers/boot_lies" env-no-rank
    run "no PMIx server" 30 - env -u SOFTVIA_RANK -u SOFTVIA_SIZE "$B/tests/launchers/boot_lies" env-no-server
    run "a peer that never joins (-np 2)" 60 - "${MPIRUN[@]}" -np 2 "$B/tests/launchers/boot_lies" silent-peer
    # An AM SPMD program in the liar's environment stops with the reason, not a hang.
    out=$(env -u PMIX_RANK PMIX_NAMESPACE=liar timeout 30 "$B/tests/am/am_pingpong" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! echo "$out" | grep -q PMIX_RANK; then
        echo "am_pingpong in a liar's environment: rc=$rc, no PMIX_RANK in: $out" | tail -5; fail=1
    else
        echo "am_pingpong in a liar's environment: $(echo "$out" | grep PMIX_RANK | head -1)"
    fi
    ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "PASS: $CASE" || echo "FAIL: $CASE"
exit $fail
