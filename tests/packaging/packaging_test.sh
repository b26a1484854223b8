#!/usr/bin/env bash
# packaging_test.sh CMAKE BUILD_DIR CONSUMER_SRC GENERATOR MAKE_PROGRAM C_COMPILER VERSION [SANITIZE]
# Installs the build tree into a temporary prefix with `cmake --install --prefix`, then
#  checks every installed shared library's SONAME, symlinks, .pc file and CMake target,
#  (c) checks what libvipl and libamvia export (only their API, at one version node),
#  (a) builds and runs a consumer project with find_package(softvia): a program on
#      softvia::vipl (opens a NIC), one on softvia::amvia (AM request to itself), a
#      Split-C one and one on softvia::softvia_shm (the same-host path),
#  (b) builds and runs the same programs with `cc $(pkg-config --cflags --libs vipl|amvia)`,
#  and checks that nicfw is not installed.
# Exits 77 (skipped) when a tool it needs is missing.
set -u

CMAKE=$1
BUILD=$2
CONSUMER=$3
GENERATOR=$4
MAKE_PROGRAM=$5
CC_BIN=$6
VERSION=$7
SANITIZE=${8:-}

T=$(mktemp -d "${TMPDIR:-/tmp}/packaging_test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
P=$T/prefix

fail() {
    echo "FAIL: $*" >&2
    [ -s "$T/log" ] && { echo "--- log:" >&2; cat "$T/log" >&2; }
    exit 1
}
step() { echo "== $*"; }

for tool in pkg-config nm objdump; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
[ -x "$CC_BIN" ] || command -v "$CC_BIN" >/dev/null || { echo "SKIP: C compiler $CC_BIN not found"; exit 77; }

san_flags=()
[ -n "$SANITIZE" ] && san_flags=("-fsanitize=$SANITIZE" -fno-omit-frame-pointer)

# ---- install -------------------------------------------------------------------------
step "cmake --install $BUILD --prefix $P"
"$CMAKE" --install "$BUILD" --prefix "$P" >"$T/log" 2>&1 || fail "cmake --install failed"

# Where GNUInstallDirs put the libraries (lib, or lib/<multiarch> for prefix /usr).
lib=$(dirname "$(find "$P" -name 'libvipl.so' | head -1)")
[ -n "$lib" ] && [ "$lib" != . ] || fail "libvipl.so not installed"
echo "libdir: $lib"
[ -f "$P/include/vipl.h" ] || fail "include/vipl.h not installed"
[ -f "$lib/pkgconfig/vipl.pc" ] || fail "$lib/pkgconfig/vipl.pc not installed"
[ -f "$lib/cmake/softvia/softviaConfig.cmake" ] || fail "softviaConfig.cmake not installed"
[ -f "$lib/cmake/softvia/softviaConfigVersion.cmake" ] || fail "softviaConfigVersion.cmake not installed"
[ -x "$P/bin/softvia-nicinfo" ] || fail "bin/softvia-nicinfo not installed"
[ -x "$P/bin/softvia-run" ] || fail "bin/softvia-run not installed"

# Every installed shared library follows one pattern (cmake/SoftviaPackaging.cmake,
# softvia_add_library_package): libX.so -> libX.so.MAJOR -> libX.so.VERSION, SONAME
# libX.so.MAJOR, X.pc at VERSION with this prefix's directories, and the CMake target
# softvia::X. A library installed some other way fails here.
major=${VERSION%%.*}
targets_file=$lib/cmake/softvia/softviaTargets.cmake
[ -f "$targets_file" ] || fail "softviaTargets.cmake not installed"
export PKG_CONFIG_PATH=$lib/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
libs=$(cd "$lib" && ls lib*.so | sed 's/^lib//; s/\.so$//' | sort)
echo "shared libraries: $(echo $libs)"
for want in amvia softvia_shm splitc vipl; do
    echo "$libs" | grep -qx "$want" || fail "lib$want.so not installed"
done
for name in $libs; do
    f=lib$name.so
    [ "$(readlink "$lib/$f")" = "$f.$major" ] || fail "$f -> $(readlink "$lib/$f"), expected $f.$major"
    [ "$(readlink "$lib/$f.$major")" = "$f.$VERSION" ] ||
        fail "$f.$major -> $(readlink "$lib/$f.$major"), expected $f.$VERSION"
    [ -f "$lib/$f.$VERSION" ] && [ ! -L "$lib/$f.$VERSION" ] || fail "$f.$VERSION is not a file"
    soname=$(objdump -p "$lib/$f.$VERSION" | awk '$1 == "SONAME" { print $2 }')
    [ "$soname" = "$f.$major" ] || fail "$f: SONAME is '$soname', expected $f.$major"
    [ -f "$lib/pkgconfig/$name.pc" ] || fail "$lib/pkgconfig/$name.pc not installed"
    v=$(pkg-config --modversion "$name" 2>&1) || fail "pkg-config --modversion $name: $v"
    [ "$v" = "$VERSION" ] || fail "$name.pc version '$v', expected $VERSION"
    [ "$(pkg-config --variable=libdir "$name")" = "$lib" ] ||
        fail "$name.pc libdir '$(pkg-config --variable=libdir "$name")', expected $lib"
    [ "$(pkg-config --variable=includedir "$name")" = "$P/include" ] || fail "$name.pc includedir is not $P/include"
    grep -q "^add_library(softvia::$name SHARED IMPORTED)" "$targets_file" ||
        fail "softviaTargets.cmake has no shared target softvia::$name"
    echo "lib$name: SONAME $soname, $name.pc $v, softvia::$name"
done
[ -f "$P/include/am.h" ] || fail "include/am.h not installed"

# libvipl holds the NIC's process-wide fault handler: it must never be unloaded (a
# dlclose would leave the SIGSEGV/SIGBUS handler pointing at unmapped code).
readelf -d "$lib/libvipl.so.$VERSION" | grep -q 'FLAGS_1.*NODELETE' || fail "libvipl is not linked with -z nodelete"

# nicfw is linked into libvipl: neither its library nor its headers are installed.
leaked=$(find "$P" \( -iname '*nicfw*' \) -print)
[ -z "$leaked" ] || fail "nicfw installed: $leaked"

# loads FILE SONAME...: the dynamic loader finds each SONAME for FILE in $lib (not in
# the build tree), without LD_LIBRARY_PATH.
loads() {
    local f=$1 so got
    shift
    env -u LD_LIBRARY_PATH ldd "$f" >"$T/log" 2>&1 || fail "ldd $f failed"
    for so in "$@"; do
        got=$(awk -v n="$so" '$1 == n && $2 == "=>" { print $3 }' "$T/log")
        [ -n "$got" ] && [ "$(realpath "$got")" = "$(realpath "$lib/$so")" ] ||
            fail "$f does not load $lib/$so (got '$got')"
    done
}
# Installed programs and libraries find softvia's libraries in the prefix (RUNPATH).
loads "$P/bin/vipl_bench" "libvipl.so.$major"
loads "$lib/libamvia.so.$major" "libvipl.so.$major"
loads "$lib/libsplitc.so.$major" "libamvia.so.$major" "libvipl.so.$major" "libsoftvia_shm.so.$major"
[ -f "$P/include/softvia_shm.h" ] || fail "softvia_shm.h not installed"
[ -f "$lib/libsplitc_main.a" ] || fail "libsplitc_main.a not installed"
[ -f "$P/include/splitc.h" ] && [ -f "$P/include/splitc.hpp" ] || fail "splitc.h / splitc.hpp not installed"

# The installed tool runs (it needs nothing but the kernel's /proc).
"$P/bin/softvia-nicinfo" --pid $$ >"$T/log" 2>&1 || fail "installed softvia-nicinfo failed"
grep -qx 'no softvia NICs open' "$T/log" || fail "installed softvia-nicinfo: unexpected output"

# ---- (c) exported symbols ---------------------------------------------------------------
# check_exports NAME NODE PATTERN MIN SYMBOL...: every defined dynamic symbol of
# libNAME is its version node or matches PATTERN (an awk regex), at least MIN do, all
# carry version NODE, and each SYMBOL is an exported function.
check_exports() {
    local name=$1 node=$2 pat=$3 min=$4 so bad nsyms unversioned ndef s
    shift 4
    so=$lib/lib$name.so.$VERSION
    step "exported symbols of lib$name.so.$VERSION"
    nm -D --defined-only "$so" >"$T/nm" 2>&1 || { cp "$T/nm" "$T/log"; fail "nm -D $so failed"; }
    bad=$(awk -v node="$node" -v pat="$pat" '{ n = $NF; sub(/@.*/, "", n) } n != node && n !~ pat { print n }' "$T/nm")
    [ -z "$bad" ] || { cp "$T/nm" "$T/log"; fail "lib$name exports symbols outside its API: $(echo $bad | head -c 400)"; }
    nsyms=$(awk -v pat="$pat" '$NF ~ pat' "$T/nm" | wc -l)
    [ "$nsyms" -ge "$min" ] || { cp "$T/nm" "$T/log"; fail "lib$name: only $nsyms API symbols exported"; }
    for s in "$@"; do
        grep -Eq " T $s(@@$node)?\$" "$T/nm" || { cp "$T/nm" "$T/log"; fail "lib$name: $s not exported"; }
    done
    # objdump -T lists "... section size version name"; every defined symbol must carry
    # NODE (the default version, shown without parentheses).
    objdump -T "$so" >"$T/objdump" 2>&1 || { cp "$T/objdump" "$T/log"; fail "objdump -T $so failed"; }
    unversioned=$(awk -v node="$node" '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ && $(NF-1) != node { print $NF " (" $(NF-1) ")" }' "$T/objdump")
    [ -z "$unversioned" ] || { cp "$T/objdump" "$T/log"; fail "lib$name: symbols without version $node: $(echo $unversioned | head -c 400)"; }
    ndef=$(awk -v node="$node" -v pat="$pat" '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ && $(NF-1) == node && $NF ~ pat' "$T/objdump" | wc -l)
    [ "$ndef" -eq "$nsyms" ] || fail "lib$name: objdump -T shows $ndef API symbols at $node, nm -D $nsyms"
    echo "$nsyms symbols, all at $node"
}
check_exports vipl VIPL_1.0 '^Vip' 30 VipOpenNic VipCloseNic VipQueryNic VipCreateVi VipPostSend \
    VipPostRecv VipConnectPeerRequest VipExtOpenNic VipExtReturnString VipExtQueryNicCounters
# The AM-2 API (AM_*) and softvia's AM extensions (AMX_*), SPMD start-up included;
# not the launcher's sv_boot_* that libamvia carries inside.
check_exports amvia AMVIA_1.0 '^AMX?_' 40 AM_Init AM_Terminate AM_AllocateBundle AM_AllocateEndpoint \
    AM_Map AM_SetHandler AM_Poll AM_SetSeg AMX_Request AMX_Reply AMX_ErrorString AMX_SPMDStartup \
    AMX_SPMDMyProc AMX_SPMDNumProcs AMX_SPMDBarrier AMX_SPMDAllGather AMX_SPMDExit
# The Split-C API; not the launcher's sv_boot_* nor the runtime's C++ internals.
check_exports splitc SPLITC_1.0 '^(splitc_|read_|write_|get_|put_|store_|bulk_|all_|atomic_|(barrier|store_sync|reset_store_sync)(@|$))' 60 \
    splitc_run splitc_sync splitc_exit splitc_poll read_int write_double get_long put_char store_float bulk_get \
    bulk_store store_sync all_store_sync all_spread_malloc all_reduce_to_all_add_double atomic_call barrier

# The same-host path's API (sv_shm_*); not the launcher's sv_boot_* it carries inside.
check_exports softvia_shm SOFTVIA_SHM_1.0 '^sv_shm_' 30 sv_shm_init sv_shm_finalize sv_shm_export sv_shm_attach \
    sv_shm_detach sv_shm_translate sv_shm_read sv_shm_write sv_shm_fetch_add64 sv_shm_call sv_shm_barrier

# ---- (a) CMake consumer ----------------------------------------------------------------
step "find_package(softvia) consumer"
cmake_args=(-S "$CONSUMER" -B "$T/consumer" -G "$GENERATOR" -DCMAKE_PREFIX_PATH="$P"
            -DCMAKE_C_COMPILER="$CC_BIN" -DSOFTVIA_EXPECT_VERSION="$VERSION" -DCMAKE_BUILD_TYPE=Release)
[ -n "$MAKE_PROGRAM" ] && cmake_args+=(-DCMAKE_MAKE_PROGRAM="$MAKE_PROGRAM")
if [ -n "$SANITIZE" ]; then
    cmake_args+=(-DCMAKE_C_FLAGS="${san_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}")
fi
# Nothing from the build tree or the user's package registry may satisfy find_package.
cmake_args+=(-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
"$CMAKE" "${cmake_args[@]}" >"$T/log" 2>&1 || fail "consumer configure failed"
grep -q "softvia $VERSION from $lib/cmake/softvia" "$T/log" || fail "consumer did not find softvia $VERSION in $P"
"$CMAKE" --build "$T/consumer" >"$T/log" 2>&1 || fail "consumer build failed"
# run PROGRAM: runs it, which must print OK last.
run_app() {
    "$@" >"$T/log" 2>&1 || fail "$1 failed"
    tail -1 "$T/log" | grep -qx OK || fail "$1 did not print OK"
    cat "$T/log"
}
run_app "$T/consumer/app"
run_app "$T/consumer/am_app"
run_app "$T/consumer/sc_app"
run_app "$T/consumer/shm_app"
run_app "$T/consumer/boot_app"
# They run against the installed libraries, not the build tree's.
loads "$T/consumer/app" "libvipl.so.$major"
loads "$T/consumer/am_app" "libamvia.so.$major" "libvipl.so.$major"
loads "$T/consumer/sc_app" "libsplitc.so.$major"
loads "$T/consumer/shm_app" "libsoftvia_shm.so.$major"

# ---- (b) pkg-config --------------------------------------------------------------------
# Not installed in a system directory: the programs find the libraries this way.
export LD_LIBRARY_PATH=$lib
# pkgconf_app SRC PC OUT: cc SRC $(pkg-config --cflags --libs PC) -o OUT, then runs it.
pkgconf_app() {
    local src=$1 pc=$2 out=$3 flags
    step "pkg-config $pc"
    flags=$(pkg-config --cflags --libs "$pc" 2>&1) || fail "pkg-config --cflags --libs $pc: $flags"
    echo "pkg-config --cflags --libs $pc: $flags"
    # shellcheck disable=SC2086  # word splitting of the flags is intended
    "$CC_BIN" -Wall -Wextra -Werror "${san_flags[@]}" -o "$out" "$src" $flags >"$T/log" 2>&1 ||
        fail "cc $(basename "$src") \$(pkg-config --cflags --libs $pc) failed"
    run_app "$out"
}
pkgconf_app "$CONSUMER/app.c" vipl "$T/app_pc"
pkgconf_app "$CONSUMER/am_app.c" amvia "$T/am_app_pc"
pkgconf_app "$CONSUMER/sc_app.c" splitc "$T/sc_app_pc"
pkgconf_app "$CONSUMER/shm_app.c" softvia_shm "$T/shm_app_pc"

echo "PASS"
