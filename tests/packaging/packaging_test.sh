#!/usr/bin/env bash
# packaging_test.sh CMAKE BUILD_DIR CONSUMER_SRC GENERATOR MAKE_PROGRAM C_COMPILER VERSION [SANITIZE]
# Installs the build tree into a temporary prefix with `cmake --install --prefix`, then
#  (a) builds and runs a consumer project with find_package(softvia) + softvia::vipl,
#  (b) builds and runs the same program with `cc $(pkg-config --cflags --libs vipl)`,
#  (c) checks what libvipl exports (only Vip* symbols, all at version VIPL_1.0), its
#      SONAME and symlinks, and that nicfw is not installed.
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

# SONAME and the symlink chain libvipl.so -> libvipl.so.0 -> libvipl.so.$VERSION.
[ "$(readlink "$lib/libvipl.so")" = libvipl.so.0 ] || fail "libvipl.so -> $(readlink "$lib/libvipl.so"), expected libvipl.so.0"
[ "$(readlink "$lib/libvipl.so.0")" = "libvipl.so.$VERSION" ] ||
    fail "libvipl.so.0 -> $(readlink "$lib/libvipl.so.0"), expected libvipl.so.$VERSION"
[ -f "$lib/libvipl.so.$VERSION" ] && [ ! -L "$lib/libvipl.so.$VERSION" ] || fail "libvipl.so.$VERSION is not a file"
soname=$(objdump -p "$lib/libvipl.so.$VERSION" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libvipl.so.0 ] || fail "SONAME is '$soname', expected libvipl.so.0"

# nicfw is linked into libvipl: neither its library nor its headers are installed.
leaked=$(find "$P" \( -iname '*nicfw*' \) -print)
[ -z "$leaked" ] || fail "nicfw installed: $leaked"

# The installed tool runs (it needs nothing but the kernel's /proc).
"$P/bin/softvia-nicinfo" --pid $$ >"$T/log" 2>&1 || fail "installed softvia-nicinfo failed"
grep -qx 'no softvia NICs open' "$T/log" || fail "installed softvia-nicinfo: unexpected output"

# ---- (c) exported symbols ---------------------------------------------------------------
step "exported symbols of libvipl.so.$VERSION"
so=$lib/libvipl.so.$VERSION
nm -D --defined-only "$so" >"$T/nm" 2>&1 || { cp "$T/nm" "$T/log"; fail "nm -D failed"; }
# Every defined dynamic symbol is a Vip* function, except the version node itself.
bad=$(awk '{ n = $NF } n != "VIPL_1.0" && n !~ /^Vip/' "$T/nm")
[ -z "$bad" ] || { cp "$T/nm" "$T/log"; fail "libvipl exports non-Vip symbols: $(echo $bad | head -c 400)"; }
nsyms=$(awk '$NF ~ /^Vip/' "$T/nm" | wc -l)
[ "$nsyms" -ge 30 ] || { cp "$T/nm" "$T/log"; fail "only $nsyms Vip* symbols exported"; }
for s in VipOpenNic VipCloseNic VipQueryNic VipCreateVi VipPostSend VipPostRecv VipConnectPeerRequest \
         VipExtOpenNic VipExtReturnString VipExtQueryNicCounters; do
    grep -Eq " T $s(@@VIPL_1\.0)?\$" "$T/nm" || { cp "$T/nm" "$T/log"; fail "$s not exported"; }
done
# Versions: objdump -T lists "... section size version name"; every defined symbol
# must carry VIPL_1.0 (the default version, shown without parentheses).
objdump -T "$so" >"$T/objdump" 2>&1 || { cp "$T/objdump" "$T/log"; fail "objdump -T failed"; }
unversioned=$(awk '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ && $(NF-1) != "VIPL_1.0" { print $NF " (" $(NF-1) ")" }' "$T/objdump")
[ -z "$unversioned" ] || { cp "$T/objdump" "$T/log"; fail "symbols without version VIPL_1.0: $(echo $unversioned | head -c 400)"; }
ndef=$(awk '/^[0-9a-f]+ / && $0 !~ /\*UND\*/ && $(NF-1) == "VIPL_1.0" && $NF ~ /^Vip/' "$T/objdump" | wc -l)
[ "$ndef" -eq "$nsyms" ] || fail "objdump -T shows $ndef Vip* symbols at VIPL_1.0, nm -D $nsyms"
echo "$nsyms Vip* symbols, all at VIPL_1.0"

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
"$T/consumer/app" >"$T/log" 2>&1 || fail "consumer app failed"
tail -1 "$T/log" | grep -qx OK || fail "consumer app did not print OK"
cat "$T/log"
# It runs against the installed library, not the build tree's.
ldd "$T/consumer/app" >"$T/log" 2>&1
grep -q "libvipl.so.0 => $lib/libvipl.so.0" "$T/log" || fail "consumer app does not load $lib/libvipl.so.0"

# ---- (b) pkg-config --------------------------------------------------------------------
step "pkg-config vipl"
export PKG_CONFIG_PATH=$lib/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
v=$(pkg-config --modversion vipl 2>&1) || fail "pkg-config --modversion vipl: $v"
[ "$v" = "$VERSION" ] || fail "vipl.pc version '$v', expected $VERSION"
flags=$(pkg-config --cflags --libs vipl 2>&1) || fail "pkg-config --cflags --libs vipl: $flags"
echo "pkg-config --cflags --libs vipl: $flags"
[ "$(pkg-config --variable=libdir vipl)" = "$lib" ] || fail "vipl.pc libdir '$(pkg-config --variable=libdir vipl)', expected $lib"
[ "$(pkg-config --variable=includedir vipl)" = "$P/include" ] || fail "vipl.pc includedir is not $P/include"
# shellcheck disable=SC2086  # word splitting of the flags is intended
"$CC_BIN" -Wall -Wextra -Werror "${san_flags[@]}" -o "$T/app_pc" "$CONSUMER/app.c" $flags >"$T/log" 2>&1 ||
    fail "cc app.c \$(pkg-config --cflags --libs vipl) failed"
LD_LIBRARY_PATH=$lib "$T/app_pc" >"$T/log" 2>&1 || fail "pkg-config app failed"
tail -1 "$T/log" | grep -qx OK || fail "pkg-config app did not print OK"
cat "$T/log"

echo "PASS"
