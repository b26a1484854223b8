#!/usr/bin/env bash
# run_conf.sh -- one conformance program (two NICs in one process) over the dpdk wire.
#
#   run_conf.sh PROGRAM [ARGS...]
#
# Makes a private network namespace holding a veth pair svc0 <-> svc1 and runs PROGRAM
# there with SOFTVIA_DEVICE naming net_af_packet%n on svc%n: the process's first NIC
# takes svc0, its second svc1 (docs/transports.md, dpdk, %n). local=wire keeps the
# same-host shortcut out of the way. The namespace goes on every exit. Exits 77 with
# the reason when the machine cannot run it.
set -uo pipefail

skip() { echo "run_conf.sh: SKIP: $*"; exit 77; }
[[ $# -gt 0 ]] || { echo "usage: run_conf.sh PROGRAM [ARGS...]" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || skip "needs root (a network namespace, raw packet sockets)"
command -v ip >/dev/null || skip "needs iproute2 (ip)"

ns=svconf$$
trap 'ip netns del "$ns" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
ip netns add "$ns" || skip "cannot create a network namespace"
ip -n "$ns" link add svc0 type veth peer name svc1 || skip "cannot create a veth pair"
ip -n "$ns" link set svc0 up && ip -n "$ns" link set svc1 up && ip -n "$ns" link set lo up ||
  { echo "run_conf.sh: veth set-up failed" >&2; exit 1; }

export SOFTVIA_DEVICE='dpdk:vdev=net_af_packet%n;iface=svc%n;qdisc_bypass=1;framecnt=4096,local=wire'
ip netns exec "$ns" "$@"
