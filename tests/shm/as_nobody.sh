#!/bin/sh
# as_nobody.sh NOFILE COMMAND... -- runs COMMAND as user nobody with at most NOFILE open
# descriptors (soft and hard limit). Needs root; exits 77 (skipped) otherwise.
[ "$(id -u)" = 0 ] || { echo "as_nobody.sh: skipped: needs root (to run as nobody)"; exit 77; }
command -v setpriv >/dev/null || { echo "as_nobody.sh: skipped: no setpriv (util-linux)"; exit 77; }
limit=$1
shift
exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'ulimit -n "$0" && exec "$@"' "$limit" "$@"
