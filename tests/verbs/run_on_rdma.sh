#!/bin/sh
# run_on_rdma.sh PROBE COMMAND...: runs COMMAND (a test over the verbs transport) when
# PROBE finds an RDMA device; otherwise exits 77 (skip) with PROBE's reason.
probe=$1
shift
"$probe" || exit 77
exec "$@"
