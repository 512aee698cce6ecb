#!/usr/bin/env bash
# Installing libparity and using it from another C project, both through pkg-config and through
# CMake's find_package(parity): a consumer program links, runs and rounds a value to bf16.
set -u
B=${PARITY_BUILD:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$B" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL: install"; exit 1; }
cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <parity/format.h>
#include <parity/version.h>
int main(void) {
    float r = parity_round_bf16(1.00390625f); /* a tie: 1 + 2^-8 rounds to even, 1.0 */
    printf("%s %.9g\n", PARITY_VERSION_STRING, r);
    return r == 1.0f ? 0 : 1;
}
C
fail=0
# A sanitizer build installs an instrumented library: its consumers need the same flags.
SAN=""
grep -q "^PARITY_SANITIZE:BOOL=ON" "$B/CMakeCache.txt" 2>/dev/null && SAN="-fsanitize=address,undefined"
# pkg-config: shared library
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib64/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
if cc -std=c11 $SAN "$tmp/use.c" -o "$tmp/use_pc" $(pkg-config --cflags --libs parity) &&
   LD_LIBRARY_PATH="$(pkg-config --variable=libdir parity)" "$tmp/use_pc"; then echo "ok: pkg-config"; else echo "FAIL: pkg-config consumer"; fail=1; fi
# CMake package
mkdir -p "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(use_parity C)
find_package(parity REQUIRED)
add_executable(use ../use.c)
target_link_libraries(use PRIVATE parity::parity_shared)
CM
if cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_FLAGS="$SAN" >"$tmp/cm.log" 2>&1 &&
   cmake --build "$tmp/cm/b" >>"$tmp/cm.log" 2>&1 && "$tmp/cm/b/use"; then echo "ok: find_package"; else cat "$tmp/cm.log"; echo "FAIL: CMake consumer"; fail=1; fi
if [ $fail = 0 ]; then echo "2 passed, 0 failed"; else echo "fail"; fi
exit $fail
