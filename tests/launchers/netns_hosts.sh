# netns_hosts.sh - sourced by the launcher tests: two "hosts" as network namespaces joined
# by a veth pair (the interface is called sv0 in both, so one SOFTVIA_DEVICE names it on
# either side), 198.18.7.1 and 198.18.7.2, and an agent for mpirun's remote start
# (plm_rsh_agent) that enters a host's namespace with a mount namespace of its own:
# a private /tmp and /dev/shm, so the two sides share nothing but the wire.
# The programs themselves (KEEP, the build tree) stay visible on both sides, as a shared
# home directory would on a cluster, also when they live under /tmp.
#   netns_up KEEP; ... HOST_A / HOST_B / NS_A / NS_B / AGENT / PRIVATE ...; netns_down (trap)
#   PRIVATE: words to put before a command to run it in private mounts (host A's side)
NS_A=svlA$$
NS_B=svlB$$
HOST_A=198.18.7.1
HOST_B=198.18.7.2
# Outside /tmp: the agent must be found on the far side, where /tmp is private.
WORK=$(mktemp -d /var/tmp/softvia-launchers.XXXXXX)
AGENT=$WORK/netns-agent
PRIVATE_SH=$WORK/private-mounts

netns_down() {
    ip netns del "$NS_A" 2>/dev/null
    ip netns del "$NS_B" 2>/dev/null
    rm -rf "$WORK"
}

netns_up() {
    local keep=${1:?netns_up: the directory both sides must see}
    trap netns_down EXIT
    ip netns add "$NS_A" && ip netns add "$NS_B" || return 1
    ip link add svl$$a type veth peer name svl$$b || return 1
    ip link set svl$$a netns "$NS_A" && ip link set svl$$b netns "$NS_B" || return 1
    ip -n "$NS_A" link set svl$$a name sv0 && ip -n "$NS_B" link set svl$$b name sv0 || return 1
    ip -n "$NS_A" addr add $HOST_A/24 dev sv0 && ip -n "$NS_B" addr add $HOST_B/24 dev sv0 || return 1
    for ns in "$NS_A" "$NS_B"; do
        ip -n "$ns" link set lo up && ip -n "$ns" link set sv0 up || return 1
    done
    # PRIVATE_SH cmd...: runs cmd with a private /tmp and /dev/shm (in the mount namespace
    # it is started in), the build tree still at its path.
    cat > "$PRIVATE_SH" <<PRIVATE_EOF
#!/bin/sh
set -e
keep='$keep'
hold='$WORK/hold'
case "\$keep" in /tmp/* | /dev/shm/*) mkdir -p "\$hold"; mount --bind "\$keep" "\$hold" ;; esac
mount -t tmpfs -o mode=1777 none /tmp
mount -t tmpfs -o mode=1777 none /dev/shm
case "\$keep" in /tmp/* | /dev/shm/*) mkdir -p "\$keep"; mount --bind "\$hold" "\$keep" ;; esac
exec "\$@"
PRIVATE_EOF
    chmod +x "$PRIVATE_SH"
    # mpirun calls: agent [options...] <host> <command words...>; the words are for a shell,
    # as ssh would hand them to one.
    cat > "$AGENT" <<AGENT_EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case "\$host" in
  $HOST_A) ns=$NS_A ;;
  $HOST_B) ns=$NS_B ;;
  *) echo "netns-agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --mount --propagation private "$PRIVATE_SH" sh -c "\$*"
AGENT_EOF
    chmod +x "$AGENT"
    PRIVATE=(ip netns exec "$NS_A" unshare --mount --propagation private "$PRIVATE_SH")
}
