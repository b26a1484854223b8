#!/usr/bin/env bash
# am_instr.sh -- instructions per message of the AM short-message rate path (am_bench
# --only rate), counted by valgrind's callgrind, so that two builds can be compared on
# a host whose speed swings.
#
#   tools/bench/am_instr.sh [BUILD_DIR] [--mode steer|marshal] [--top N]
#
# Each rank is profiled in its own pair of runs (20000 and 100000 messages; the figures
# are the difference over 80000, so start-up and connection set-up drop out):
#  sender   callgrind collects inside AMX_Request only; the receiver runs under a slower
#           valgrind (cache simulation) so that it is always busy and credits come back
#           per quarter window. "post_message" is the path of one request: header,
#           VipPostSend (doorbell, NIC step: descriptor checks, frame into the shm lane,
#           completion) and taking the send back; it does not depend on timing.
#  receiver the sender runs natively, so the receiver seldom finds nothing to do; the
#           whole program per message, from the run of each size with the fewest
#           instructions of three (idle polls only add: a preempted sender leaves the
#           receiver some; handle_frame and the AM handler's figures do not depend on it).
# Needs valgrind (callgrind_annotate). Takes about a minute.
set -uo pipefail
build=build/release; mode=steer; top=20
while (($#)); do
  case $1 in
    --mode) mode=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    --top) top=${2:-}; shift $(( $# > 1 ? 2 : 1 )) ;;
    *) build=$1; shift ;;
  esac
done
[[ $mode == steer || $mode == marshal ]] || { echo "am_instr.sh: --mode must be steer or marshal (got '$mode')" >&2; exit 2; }
[[ $top =~ ^[1-9][0-9]*$ ]] || { echo "am_instr.sh: --top must be a positive number (got '$top')" >&2; exit 2; }
run="$build/tools/launcher/softvia-run"; am="$build/tools/bench/am_bench"
for f in "$run" "$am"; do [[ -x $f ]] || { echo "am_instr.sh: $f not built" >&2; exit 2; }; done
command -v callgrind_annotate >/dev/null || { echo "am_instr.sh: needs valgrind" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The launcher runs the same command for both ranks: this wrapper picks what each runs.
cat > "$tmp/wrap.sh" <<'EOF'
#!/usr/bin/env bash
r=$1; out=$2; shift 2
if [[ ${SOFTVIA_RANK:-} == "$r" ]]; then
  extra=(); [[ $r == 0 ]] && extra=(--collect-atstart=no --toggle-collect=AMX_Request)
  exec valgrind --tool=callgrind "${extra[@]}" --callgrind-out-file="$out" "$@" 2>/dev/null
fi
[[ $r == 0 ]] && exec valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --callgrind-out-file=/dev/null "$@" 2>/dev/null
exec "$@"
EOF
chmod +x "$tmp/wrap.sh"
profile() {  # rank, tries: each size's run with the fewest instructions is kept
  local n try out
  for n in 20000 100000; do
    for ((try = 1; try <= $2; try++)); do
      out="$tmp/$n.$1.try"
      timeout 600 "$run" -n 2 --pin -- "$tmp/wrap.sh" "$1" "$out" "$am" --mode "$mode" --only rate --msgs $n \
        >/dev/null 2>&1 || { echo "am_instr.sh: run of $n messages (rank $1 profiled) failed" >&2; exit 1; }
      if [[ ! -e $tmp/$n.$1.out ]] || (($(total "$out") < $(total "$tmp/$n.$1.out"))); then
        mv "$out" "$tmp/$n.$1.out"
      fi
    done
  done
}
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

# function -> instructions, self or inclusive; names without file, arguments or namespaces
costs() {
  callgrind_annotate --threshold=100 --auto=no "$@" 2>/dev/null | awk '
    match($0, /^ *[0-9,]+ +\( *[0-9.]+%\) +/) {
      v = substr($0, 1, RLENGTH); sub(/\(.*/, "", v); gsub(/[ ,]/, "", v)
      name = substr($0, RLENGTH + 1); sub(/ \[.*\]$/, "", name)
      if (name != "PROGRAM TOTALS" && name !~ /^\?\?\?/) sub(/^[^:]*:/, "", name)
      gsub(/\(anonymous namespace\)::/, "", name); gsub(/softvia::nicfw::/, "", name); sub(/\(.*/, "", name)
      print name "\t" v
    }'
}
# per message: (large - small) / 80000, summed (self) or the largest entry (inclusive)
per_msg() {  # tag, self|incl
  local opt=(); [[ $2 == incl ]] && opt=(--inclusive=yes)
  awk -F'\t' -v incl="$2" '
    FNR == 1 { f++ }
    { v = $2 + 0; k = $1
      if (incl == "incl") { if (v > c[f, k]) c[f, k] = v } else c[f, k] += v
      seen[k] = 1 }
    END { for (k in seen) printf "%s\t%.1f\n", k, (c[2, k] - c[1, k]) / 80000 }' \
    <(costs "${opt[@]}" "$tmp/20000.$1.out") <(costs "${opt[@]}" "$tmp/100000.$1.out")
}
pick() { awk -F'\t' -v k="$1" '$1 == k { printf "%.0f", $2; found = 1 } END { if (!found) printf "0" }'; }

profile 0 1
profile 1 3
si=$(per_msg 0 incl); ri=$(per_msg 1 incl); rs=$(per_msg 1 self)
echo "# am_instr: $build, mode=$mode, instructions per message (callgrind)"
printf "sender   post_message %s  (VipPostSend %s, Engine::transmit %s)\n" \
  "$(pick post_message <<<"$si")" "$(pick VipPostSend <<<"$si")" "$(pick Engine::transmit <<<"$si")"
printf "receiver total %s  (Engine::handle_frame %s, AM handle %s)\n" \
  "$(pick "PROGRAM TOTALS" <<<"$rs")" "$(pick Engine::handle_frame <<<"$ri")" "$(pick handle <<<"$ri")"
echo "sender, self per message (inside AMX_Request, credit waits included):"
per_msg 0 self | sort -t$'\t' -k2,2 -rn | grep -v "PROGRAM TOTALS" | head -n "$top" | awk -F'\t' '{ printf "  %8s  %s\n", $2, $1 }'
echo "receiver, self per message:"
grep -v "PROGRAM TOTALS" <<<"$rs" | sort -t$'\t' -k2,2 -rn | head -n "$top" | awk -F'\t' '{ printf "  %8s  %s\n", $2, $1 }'
