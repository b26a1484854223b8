#!/usr/bin/env bash
# check_layers.sh SRC: the layering rules, checked by grep on the source tree.
# Layers depend downward only (apps -> splitc -> am -> vipl -> nicfw -> transports, shm/
# beside the network path, boot/ below everything), and the firmware knows nothing of
# VIA: the driver/device contract is nicfw/abi.h (docs/abi.md).
set -uo pipefail
src=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$src" || exit 1
bad=0

# forbid DIR REGEX WHY: no C/C++ file under DIR includes a header matching REGEX.
forbid() {
    local dir=$1 re=$2 why=$3 hits
    hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($re)[>\"]" "$dir" \
           --include='*.c' --include='*.cc' --include='*.h' --include='*.hpp' --include='*.S' || true)
    if [ -n "$hits" ]; then
        echo "FAIL: $why"
        echo "$hits" | sed 's/^/    /'
        bad=1
    fi
}

forbid nicfw 'vipl\.h|am\.h|splitc\.h|splitc\.hpp|softvia_shm\.h' "the firmware includes a header of a layer above it"
forbid boot 'vipl\.h|nicfw/[a-z_]+\.h|am\.h|splitc\.h|splitc\.hpp|softvia_shm\.h' "boot/ is below everything"
forbid vipl 'am\.h|splitc\.h|splitc\.hpp|softvia_shm\.h' "vipl/ includes a header of a layer above it"
forbid am 'splitc\.h|splitc\.hpp|softvia_shm\.h|nicfw/[a-z_]+\.h' "am/ reaches above it or past vipl into the device"
forbid shm 'vipl\.h|am\.h|splitc\.h|splitc\.hpp|nicfw/[a-z_]+\.h' "shm/ is beside the network path, not on it"
forbid splitc 'nicfw/[a-z_]+\.h' "splitc/ reaches past vipl into the device"

# The firmware's code names no VIA identifier (comments may cite VIA).
hits=$(grep -rnE '\bVIP[A-Z]*_[A-Z_]+|\bVip[A-Z][A-Za-z]+\(' nicfw --include='*.cc' --include='*.h' \
       | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(//|\*|/\*)' || true)
if [ -n "$hits" ]; then
    echo "FAIL: VIA names in the firmware's code (the device speaks nicfw/abi.h)"
    echo "$hits" | sed 's/^/    /'
    bad=1
fi

# nicfw's build target does not put the driver's headers on its include path.
if grep -nE 'vipl/include' nicfw/CMakeLists.txt; then
    echo "FAIL: nicfw/CMakeLists.txt puts vipl/include on the firmware's include path"
    bad=1
fi

[ $bad -eq 0 ] && echo "layering: every rule holds"
exit $bad
