#!/usr/bin/env bash
# The split of include/parity/ into the stable and the experimental part (docs/c-api.md, issue
# #40): each stable header (parity.h, status.h, verdict.h, version.h, kernel_abi.h, op_abi.h)
# compiles on its own without PARITY_STATIC_LINKING_ONLY; every other header is an #error without
# it that names the header, and compiles on its own with it.
# Usage: experimental_guard.sh CC SOURCE_DIR BUILD_DIR
set -u
CC=$1 S=$2 B=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
flags=(-std=c11 -fsyntax-only -D_DEFAULT_SOURCE -I"$S/include" -I"$B/include")
for h in "$S"/include/parity/*.h "$B"/include/parity/version.h; do
  name=$(basename "$h")
  [ "$name" = deprecated.h ] && continue # included by the renamed headers only
  printf '#include "parity/%s"\nint parity_guard_probe;\n' "$name" >"$tmp/t.c"
  case $name in
    parity.h | status.h | verdict.h | version.h | kernel_abi.h | op_abi.h)
      if "$CC" "${flags[@]}" "$tmp/t.c" >"$tmp/out" 2>&1; then pass=$((pass + 1)); else
        echo "FAIL: stable $name does not compile without PARITY_STATIC_LINKING_ONLY:"; head -5 "$tmp/out"; fail=$((fail + 1)); fi
      ;;
    *)
      if "$CC" "${flags[@]}" "$tmp/t.c" >"$tmp/out" 2>&1; then
        echo "FAIL: experimental $name compiles without PARITY_STATIC_LINKING_ONLY"; fail=$((fail + 1))
      elif grep -q "parity/$name is in the experimental part" "$tmp/out"; then pass=$((pass + 1)); else
        echo "FAIL: $name fails without the define, but not with its #error:"; head -5 "$tmp/out"; fail=$((fail + 1)); fi
      ;;
  esac
  if "$CC" "${flags[@]}" -DPARITY_STATIC_LINKING_ONLY "$tmp/t.c" >"$tmp/out" 2>&1; then pass=$((pass + 1)); else
    echo "FAIL: $name does not compile with PARITY_STATIC_LINKING_ONLY:"; head -5 "$tmp/out"; fail=$((fail + 1)); fi
done
echo "experimental_guard: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -ge 50 ]
