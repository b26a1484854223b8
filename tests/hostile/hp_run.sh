#!/bin/sh
# hp_run.sh BINDIR [args...] -- every rank of the hostile-peer test, under
#   softvia-run -n 3 hp_run.sh BINDIR --progress inline|thread [--seconds S] [--seed N] [--attacks a,b]
# rank 0 the owner, 1 the good peer, 2 the hostile peer (docs/hostile-peer.md); each
# program takes the same arguments and ignores the ones meant for the others.
bindir=$1
shift
# The attack overflows the owner's udp socket while a slow build drains it (ASan: 6 MB
# queued and 34,502 datagrams dropped in the first 1.5 s of a passing run), and good
# frames go with them: the good VIs ride that out on their retry timeout, which
# stretches with the build's slowness as the tests' watchdogs do (SOFTVIA_TEST_SLOW).
: "${SOFTVIA_RETRY_TIMEOUT_MS:=$((5000 * ${SOFTVIA_TEST_SLOW:-1}))}"
export SOFTVIA_RETRY_TIMEOUT_MS
case "$SOFTVIA_RANK" in
  0) exec "$bindir/hp_owner" "$@" ;;
  1) exec "$bindir/hp_good" "$@" ;;
  2) exec "$bindir/hp_hostile" "$@" ;;
  *) echo "hp_run.sh: run it as softvia-run -n 3 hp_run.sh BINDIR ... (SOFTVIA_RANK='$SOFTVIA_RANK')" >&2; exit 2 ;;
esac
