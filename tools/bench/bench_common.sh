# bench_common.sh -- helpers shared by compare.sh and am_compare.sh (sourced, not run).
# The caller sets: quick (0 or 1) and csv (our figures, kind,label,bytes,... per line).

ucx() {  # test size field... -> those figures of ucx_perftest's Final: line, space-separated
  command -v ucx_perftest >/dev/null || { echo "n/a"; return; }
  local test=$1 size=$2; shift 2
  local port=$((20000 + RANDOM % 20000)) n=200000
  ((quick)) && n=50000
  UCX_TLS=shm,self taskset -c 0 timeout 60 ucx_perftest -p $port >/dev/null 2>&1 &
  local srv=$!
  sleep 1
  UCX_TLS=shm,self taskset -c 1 timeout 55 ucx_perftest 127.0.0.1 -p $port -t "$test" -s "$size" -n $n 2>/dev/null |
    awk -v fields="$*" '/^Final:/ {k = split(fields, f, " "); for (i = 1; i <= k; i++) printf "%s%s", $f[i], (i < k ? " " : "\n")}'
  wait $srv 2>/dev/null
}

get() {  # kind label bytes column -> value from our CSV
  awk -F, -v k="$1" -v l="$2" -v b="$3" -v c="$4" '$1==k && $2==l && $3==b {v=$c} END {print v}' "$csv"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

median() {  # numbers as arguments (empty ones skipped) -> their median, or empty
  printf '%s\n' "$@" | awk 'NF && $1 != "n/a"' | sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'
}

# This VM moves between a fast and a slow phase (the two vCPUs on one core complex or
# not: UCX's shm latency is 0.13 us in one and 0.5 us in the other), sometimes within a
# minute. A ratio of two figures measured minutes apart can then be off by 3x, so the
# key comparisons are made in rounds, ours and the peer's back to back, and the summary
# gives the median of the per-round ratios. rounds: 5, or 1 with --quick.
rounds=5; ((${quick:-0})) && rounds=1
