#!/usr/bin/env bash
# Symbol hygiene of libparity.so: it exports exactly the public API — every parity_* function or
# object that include/parity/*.h declares and the library defines — and nothing else (no internal
# helper, no catalog table, no unprefixed name).
set -u
LIB=${PARITY_LIB:?PARITY_LIB must point at libparity.so}
S=${PARITY_SRC:?}
B=${PARITY_BUILD:?}
command -v nm >/dev/null || { echo "SKIP: nm not found (binutils)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
# What the dynamic symbol table offers (defined, global, code or data; the version node aside).
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ && $3 != "PARITY_0" {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
# The public names: the export list generated from the headers, intersected with what the static
# library defines (a header may declare a function that a plugin, not libparity, defines).
sed -n 's/^    \(parity_[a-z0-9_]*\);$/\1/p' "$B/parity.map" | sort -u >"$tmp/public"
nm --defined-only "$B/libparity.a" 2>/dev/null | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u >"$tmp/defined"
comm -12 "$tmp/public" "$tmp/defined" >"$tmp/want"
n=$(wc -l <"$tmp/want")
if [ "$n" -ge 200 ]; then pass=$((pass + 1)); else echo "FAIL: only $n public symbols found (the header scan is broken)"; fail=$((fail + 1)); fi
extra=$(comm -23 "$tmp/exported" "$tmp/want")
if [ -z "$extra" ]; then pass=$((pass + 1)); else echo "FAIL: exported but not public:"; echo "$extra" | head -20; fail=$((fail + 1)); fi
missing=$(comm -13 "$tmp/exported" "$tmp/want")
if [ -z "$missing" ]; then pass=$((pass + 1)); else echo "FAIL: public but not exported:"; echo "$missing" | head -20; fail=$((fail + 1)); fi
# Every public name is declared in a header: spot-check the scan against two known declarations.
grep -qx "parity_data_path" "$tmp/want" && grep -qx "parity_emu_names" "$tmp/want" && pass=$((pass + 1)) ||
  { echo "FAIL: parity_data_path / parity_emu_names missing from the public list"; fail=$((fail + 1)); }
echo "cli_symbols: $n public symbols exported; $pass passed, $fail failed"
[ "$fail" = 0 ]
