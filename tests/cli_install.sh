#!/usr/bin/env bash
# Installing libparity and using it from another C project, both through pkg-config and through
# CMake's find_package(parity): a consumer program links, runs and rounds a value to bf16. Then the
# data lookup of an installed parity (status.h): the installed share/parity comes before the source
# tree, $PARITY_DATA before both, a missing file names the three places; and the installed CLI
# prints stories260K's greedy text byte for byte from another working directory.
set -u
B=${PARITY_BUILD:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$B" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "FAIL: install"; exit 1; }
cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#define PARITY_STATIC_LINKING_ONLY /* format.h is in the experimental part (docs/c-api.md) */
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

# Data lookup through the installed shared library.
cat >"$tmp/data.c" <<'C'
#include <stdio.h>
#include <parity/status.h>
int main(int argc, char **argv) {
    char p[4096];
    parity_diag_t d;
    parity_status_t st = parity_data_path(argc > 1 ? argv[1] : "tok512.bin", p, sizeof p, &d);
    if (st != PARITY_OK) { fprintf(stderr, "%s\n", d.msg); return parity_status_exit_code(st); }
    printf("%s\n", p);
    return 0;
}
C
n=2
check() { # name, command...: counts a pass or a failure
  local name=$1; shift
  if "$@"; then echo "ok: $name"; n=$((n + 1)); else echo "FAIL: $name"; fail=1; return 1; fi
}
# shellcheck disable=SC2046
if cc -std=c11 $SAN "$tmp/data.c" -o "$tmp/data" $(pkg-config --cflags --libs parity); then
  LIBDIR="$(pkg-config --variable=libdir parity)"
  PFX=$(cd "$tmp/prefix" && pwd -P)
  got=$(cd "$tmp" && env -u PARITY_DATA LD_LIBRARY_PATH="$LIBDIR" ./data tok512.bin)
  check "installed data folder first" [ "$got" = "$PFX/share/parity/tok512.bin" ]
  mkdir -p "$tmp/alt" && cp "$tmp/prefix/share/parity/tok512.bin" "$tmp/alt/"
  got=$(cd "$tmp" && PARITY_DATA="$tmp/alt" LD_LIBRARY_PATH="$LIBDIR" ./data tok512.bin)
  check "\$PARITY_DATA before the installed folder" [ "$got" = "$tmp/alt/tok512.bin" ]
  got=$(cd "$tmp" && PARITY_DATA="$tmp/alt" LD_LIBRARY_PATH="$LIBDIR" ./data tinyshakespeare.txt)
  check "file by file: what \$PARITY_DATA lacks comes from the installed folder" [ "$got" = "$PFX/share/parity/tinyshakespeare.txt" ]
  (cd "$tmp" && env -u PARITY_DATA LD_LIBRARY_PATH="$LIBDIR" ./data no_such_file.bin) >/dev/null 2>"$tmp/miss.txt"
  rc=$?
  check "missing file: exit 3" [ $rc = 3 ]
  check "missing file: names the file and the three places" grep -q "no_such_file.bin: data file not found; looked in \$PARITY_DATA (unset), the installed data folder ($PFX/share/parity) and the source tree (${PARITY_SRC:-}/data)" "$tmp/miss.txt" || cat "$tmp/miss.txt"
else
  echo "FAIL: data lookup consumer does not build"; fail=1
fi

# The installed CLI, from another working directory, on the installed data.
if (cd "$tmp" && env -u PARITY_DATA prefix/bin/parity model run -n 200 >"$tmp/model.txt" 2>"$tmp/model.err"); then
  { cat "$tmp/prefix/share/parity/stories260K_expected_t0_n200.txt"; printf '\n'; } >"$tmp/want.txt"
  check "installed parity model run: llama2.c's greedy text" cmp -s "$tmp/want.txt" "$tmp/model.txt"
else
  cat "$tmp/model.err"; echo "FAIL: installed parity model run"; fail=1
fi

# Started by bare name from PATH (the usual way once installed), it still finds its own data folder:
# linked statically, glibc names the program by argv[0] ("parity"), not by its file.
PFX=$(cd "$tmp/prefix" && pwd -P)
(cd "$tmp" && env -u PARITY_DATA PATH="$tmp/prefix/bin:$PATH" parity --help) >"$tmp/help.txt" 2>&1
check "installed parity from PATH: its data folder is its prefix's" grep -q "$PFX/share/parity" "$tmp/help.txt" || grep -i "data" "$tmp/help.txt"

if [ $fail = 0 ]; then echo "$n passed, 0 failed"; else echo "fail"; fi
exit $fail
