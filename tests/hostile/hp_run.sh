#!/bin/sh
# hp_run.sh BINDIR [args...] -- every rank of the hostile-peer test, under
#   softvia-run -n 3 hp_run.sh BINDIR --progress inline|thread [--seconds S] [--seed N] [--attacks a,b]
# rank 0 the owner, 1 the good peer, 2 the hostile peer (docs/hostile-peer.md); each
# program takes the same arguments and ignores the ones meant for the others.
bindir=$1
shift
case "$SOFTVIA_RANK" in
  0) exec "$bindir/hp_owner" "$@" ;;
  1) exec "$bindir/hp_good" "$@" ;;
  2) exec "$bindir/hp_hostile" "$@" ;;
  *) echo "hp_run.sh: run it as softvia-run -n 3 hp_run.sh BINDIR ... (SOFTVIA_RANK='$SOFTVIA_RANK')" >&2; exit 2 ;;
esac
