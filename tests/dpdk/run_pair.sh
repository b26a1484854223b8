#!/usr/bin/env bash
# run_pair.sh -- two ranks of a softvia program over the dpdk transport.
#
#   run_pair.sh LAUNCHER WIRE [--pin] [--timeout S] -- PROGRAM [ARGS...]
#
# WIRE is one of
#   af_packet  two network namespaces joined by a veth pair, net_af_packet on each end
#   af_xdp     the same set-up with net_af_xdp
#   memif      one process the memif server, the other the client, on one socket
# The launcher (softvia-run -n 2) starts the ranks with the job directory and rank
# variables; each rank comes back into this script (--rank), which moves it into its
# namespace with `ip netns exec` and sets SOFTVIA_DEVICE to its end of the wire. (When
# softvia-run --hosts exists this can use it instead.) Namespaces, links and sockets
# are removed on every exit. Exits 77 with the reason when the machine cannot run it.
# SV_DPDK_OPTS, if set, is appended to both device names (e.g. txbatch=32).
set -uo pipefail

if [[ ${1:-} == --rank ]]; then  # inside the launcher: one rank
  shift
  r=${SOFTVIA_RANK:?not started by softvia-run}
  dev_var=SV_DPDK_DEV$r ns_var=SV_DPDK_NS$r
  export SOFTVIA_DEVICE=${!dev_var}${SV_DPDK_OPTS:+,$SV_DPDK_OPTS}
  ns=${!ns_var:-}
  if [[ -n $ns ]]; then exec ip netns exec "$ns" "$@"; fi
  exec "$@"
fi

skip() { echo "run_pair.sh: SKIP: $*"; exit 77; }
launcher=${1:?usage: run_pair.sh LAUNCHER WIRE [--pin] [--timeout S] -- PROGRAM [ARGS...]}
wire=${2:?wire: af_packet, af_xdp or memif}
shift 2
lopts=()
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --pin) lopts+=(--pin); shift ;;
    --timeout) lopts+=(--timeout "$2"); shift 2 ;;
    *) echo "run_pair.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] && shift
[[ $# -gt 0 ]] || { echo "run_pair.sh: no program" >&2; exit 2; }

[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, raw packet sockets)"
command -v ip >/dev/null || skip "needs iproute2 (ip)"
[[ -d /usr/lib/x86_64-linux-gnu/dpdk || -n $(ls /usr/lib/*/dpdk 2>/dev/null) ]] || skip "no DPDK drivers installed"

id=$$
nsa=svdpa$id nsb=svdpb$id va=svda$id vb=svdb$id
sock=/tmp/softvia-memif-$id.sock
cleanup() {
  if [[ -n ${SV_DPDK_LINK_STATS:-} ]]; then  # where frames were lost, for diagnosis
    ip -n "$nsa" -s link show "$va" 2>/dev/null; ip -n "$nsb" -s link show "$vb" 2>/dev/null
  fi
  ip netns del "$nsa" 2>/dev/null
  ip netns del "$nsb" 2>/dev/null
  rm -f "$sock"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

veth_pair() {
  ip netns add "$nsa" && ip netns add "$nsb" || skip "cannot create network namespaces"
  ip link add "$va" type veth peer name "$vb" || skip "cannot create a veth pair"
  ip link set "$va" netns "$nsa" && ip link set "$vb" netns "$nsb" &&
    ip -n "$nsa" addr add 198.18.201.1/24 dev "$va" && ip -n "$nsb" addr add 198.18.201.2/24 dev "$vb" &&
    ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
    ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up || { echo "run_pair.sh: veth set-up failed" >&2; exit 1; }
  export SV_DPDK_NS0=$nsa SV_DPDK_NS1=$nsb
}

case $wire in
  af_packet)
    veth_pair
    export SV_DPDK_DEV0="dpdk:vdev=net_af_packet0;iface=$va;qdisc_bypass=1;framecnt=4096"
    export SV_DPDK_DEV1="dpdk:vdev=net_af_packet0;iface=$vb;qdisc_bypass=1;framecnt=4096" ;;
  af_xdp)
    veth_pair
    export SV_DPDK_DEV0="dpdk:vdev=net_af_xdp0;iface=$va;start_queue=0;queue_count=1"
    export SV_DPDK_DEV1="dpdk:vdev=net_af_xdp0;iface=$vb;start_queue=0;queue_count=1" ;;
  memif)
    # Both ends on this host: local=wire keeps a same-host shortcut from taking over.
    export SV_DPDK_NS0= SV_DPDK_NS1=
    export SV_DPDK_DEV0="dpdk:vdev=net_memif0;role=server;socket=$sock;socket-abstract=no,local=wire"
    export SV_DPDK_DEV1="dpdk:vdev=net_memif0;role=client;socket=$sock;socket-abstract=no,local=wire" ;;
  *) echo "run_pair.sh: unknown wire '$wire'" >&2; exit 2 ;;
esac
export SOFTVIA_PROGRESS= SOFTVIA_HOSTS=

"$launcher" -n 2 "${lopts[@]}" -- "$0" --rank "$@"
