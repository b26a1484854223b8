#!/usr/bin/env bash
# capture_rank.sh DIR PROGRAM [ARGS...] -- a rank of a softvia-run --hosts job, captured.
#
#   softvia-run -n 2 --hosts 2 capture_rank.sh DIR PROGRAM [ARGS...]
#
# Rank 0 (on host 0) captures its host's interface ($SOFTVIA_HOST_IFACE, a veth in the
# host's network namespace) into DIR/capture.pcap with tcpdump (its messages in
# DIR/tcpdump.err) and starts PROGRAM only once tcpdump listens, so the capture has the
# job's first frame. Every rank runs PROGRAM, then marks DIR/done.<rank>; rank 0 stops the
# capture once every rank is done (at most 10 s after itself), so the frames the others
# send last (ACKs, DISCONNECTs) are in it. DIR must exist. Used by softvia_dissector.sh
# (with SOFTVIA_RANK and SOFTVIA_SIZE unset and SOFTVIA_HOST_IFACE=lo for a one-process
# run in a private namespace) and by hand (docs/wireshark.md).
# Exit: PROGRAM's status; 125 when the capture cannot start or the interface's
# segmentation cannot be turned off (unless CAPTURE_SEGMENTATION=keep).
set -u
dir=$1
shift
rank=${SOFTVIA_RANK:-0}
size=${SOFTVIA_SIZE:-1}
iface=${SOFTVIA_HOST_IFACE:?capture_rank.sh runs under softvia-run --hosts (or with SOFTVIA_HOST_IFACE set)}
# udp sends trains of datagrams as one packet that the interface cuts (gso=auto,
# docs/transports.md); a capture taps the packet before that cut. With the interface's
# tx-udp-segmentation off the kernel cuts trains in software before the tap, and the
# capture shows the datagrams the wire carries. Every rank does it for its own interface
# before its program runs (a train from host 1 would otherwise reach host 0's veth whole).
# CAPTURE_SEGMENTATION=keep leaves it on: the capture then has the trains whole (the
# dissector cuts them; softvia_dissector.sh's train job checks that).
if [[ ${CAPTURE_SEGMENTATION:-off} != keep ]] && ! err=$(ethtool -K "$iface" tx-udp-segmentation off 2>&1); then
  echo "capture_rank.sh: cannot turn off tx-udp-segmentation on $iface (ethtool -K): $err" >&2
  exit 125
fi
cap_pid=
if [[ $rank == 0 ]]; then
  # To stdout, not -w FILE: tcpdump may drop privileges or be confined to some paths
  # (AppArmor); the shell's redirection is not. --immediate-mode: each packet reaches
  # tcpdump as it comes (a packet still in the ring's current block when tcpdump stops
  # would be lost). -s 4096: the wires' frames are at most 1514 bytes here, and the ring
  # then holds thousands of them (a slot per snapshot length) while tcpdump waits for a
  # CPU. timeout: a capture never outlives a job whose launcher was killed.
  # With trains kept whole a packet holds several datagrams: 16 KiB takes those of the
  # test's 4 KiB messages.
  snap=4096
  [[ ${CAPTURE_SEGMENTATION:-off} == keep ]] && snap=16384
  timeout 120 tcpdump -i "$iface" -n -s $snap -B 32768 --immediate-mode -w - >"$dir/capture.pcap" 2>"$dir/tcpdump.err" &
  cap_pid=$!
  for _ in $(seq 250); do
    grep -q "listening on" "$dir/tcpdump.err" 2>/dev/null && break
    kill -0 "$cap_pid" 2>/dev/null || break
    sleep 0.02
  done
  if ! grep -q "listening on" "$dir/tcpdump.err"; then
    echo "capture_rank.sh: tcpdump did not start on $iface:" >&2
    cat "$dir/tcpdump.err" >&2
    kill "$cap_pid" 2>/dev/null
    exit 125
  fi
fi
"$@"
rc=$?
: >"$dir/done.$rank"
if [[ -n $cap_pid ]]; then
  for _ in $(seq 500); do
    (($(find "$dir" -maxdepth 1 -name 'done.*' | wc -l) >= size)) && break
    sleep 0.02
  done
  sleep 0.2  # the last frames of the others on their way
  kill -INT "$cap_pid" 2>/dev/null
  wait "$cap_pid"
fi
exit $rc
