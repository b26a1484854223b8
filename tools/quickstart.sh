#!/usr/bin/env bash
# softvia quick start: install what is needed from Debian, build, and run.
#   tools/quickstart.sh bench   build (release) and run the two-process VIPL benchmark,
#                               beside ucx_perftest on the same machine, then the Split-C
#                               micro-benchmarks on every back end beside OpenSHMEM
#   tools/quickstart.sh test    build release and ASan+UBSan, run the whole test suite in both,
#                               the thread-mode conformance suite under TSan,
#                               then fuzz the firmware's frame parser (libFuzzer) for 2 minutes
# Needs root (or sudo) only for apt-get; everything else runs as the calling user.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
case "$what" in bench|test) ;; *) echo "usage: $0 bench|test" >&2; exit 2 ;; esac

packages=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev
          libbenchmark-dev iproute2 procps
          liburing-dev                # udp transport
          libpng-dev                  # the ray tracer's image (apps/raytrace)
          libdpdk-dev dpdk            # dpdk transport
          libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils  # verbs transport
          libpmix-dev openmpi-bin)    # boot/: started by mpirun or srun (PMIx)
[[ $what == bench ]] && packages+=(ucx-utils dpdk-dev sockperf  # peers: ucx_perftest, dpdk-testpmd, sockperf
                                   openmpi-bin libopenmpi-dev gnuplot-nox)  # OpenSHMEM beside Split-C; plots
[[ $what == test ]] && packages+=(clang libclang-rt-14-dev  # libFuzzer
                                  gnuplot-nox                 # the reproduction command's quick run (ctest reproduce_quick)
                                  tshark tcpdump ethtool python3  # the Wireshark dissector's test (tests/wireshark)
                                  slurmd slurmctld)           # srun on a single-node Slurm (ctest launchers.slurm)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "== installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

build() {  # preset
  cmake --preset "$1" -G Ninja >/dev/null
  cmake --build --preset "$1"
}

if [[ $what == bench ]]; then
  build release
  tools/bench/compare.sh build/release
  echo
  tools/bench/startup_compare.sh build/release 3   # launch to first barrier: softvia-run beside mpirun
  echo
  exec tools/bench/splitc_compare.sh build/release --quick
fi

status=0
for preset in release asan; do
  echo "== build and test: $preset"
  build "$preset"
  # -j2: two tests at a time; multi-process tests hold the "cpus" lock and run alone.
  # The ASan+UBSan pass leaves out the multi-host matrix: it runs the same programs as the
  # single-host multi-process and fault tests (which it does run), across namespaces, at
  # several times the release cost; the release pass runs it.
  # The applications at the paper's sizes (label apps_paper) take minutes: not here. The
  # reproduction command's quick run measures, and the Split-C and application jobs of 4
  # processes (label n4) repeat their 2-process runs' code: release only.
  select=(-LE apps_paper); [[ $preset == asan ]] && select=(-LE 'multihost|apps_paper|reproduce|n4|launchers')
  ctest --preset "$preset" -j2 "${select[@]}" || status=1
done
# The threaded firmware under ThreadSanitizer: the conformance programs with the firmware
# thread (progress=thread) on the shm wire, which is where application threads and the
# firmware thread share state. Only those programs are built for it.
echo "== build and test: tsan (conformance, firmware thread, shm)"
cmake --preset tsan -G Ninja >/dev/null
cmake --build --preset tsan --target conformance_programs
ctest --preset tsan -j1 -L conformance -L thread -L shm || status=1
# A bounded libFuzzer run of the frame parser (tests/fuzz), against a lossless engine and
# against one whose reliable VIs retransmit; any crash or invariant violation fails.
fuzz() {  # label, then environment assignments
  local label=$1 log=build/fuzz-$1.log; shift
  echo "== fuzz: frame parser, $label engine, 60 s"
  if env "$@" tests/fuzz/run-fuzz.sh 60 >"$log" 2>&1; then
    grep -E "^Done|stat::number_of_executed_units" "$log" | head -2
  else
    tail -40 "$log"; status=1
  fi
}
fuzz lossless FRAME_FUZZER_LOSSY=0
fuzz lossy FRAME_FUZZER_LOSSY=1
exit $status
