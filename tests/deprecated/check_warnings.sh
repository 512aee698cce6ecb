#!/usr/bin/env bash
# The deprecation of the names before issue #40's rename shows: compiling old_names.c warns at the
# uses of old function and type names, naming the new ones (GCC and clang), and with
# PARITY_NO_DEPRECATED the old names are gone (the compile fails).
# Usage: check_warnings.sh CC SOURCE_DIR BUILD_DIR
set -u
CC=$1 S=$2 B=$3
src="$S/tests/deprecated/old_names.c"
# (the renamed headers are in the experimental part: PARITY_STATIC_LINKING_ONLY, docs/c-api.md)
flags=(-std=c11 -fsyntax-only -Wdeprecated-declarations -DPARITY_STATIC_LINKING_ONLY -I"$S/include" -I"$B/include")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
if "$CC" "${flags[@]}" "$src" >"$tmp/out" 2>&1; then
  pass=$((pass + 1))
else
  echo "FAIL: old_names.c does not compile:"; head -20 "$tmp/out"; fail=$((fail + 1))
fi
for want in "use parity_safetensors_open_mem" "use parity_safetensors_file_t" "use parity_logprob_format_name" \
            "use parity_logprob_rl_opts_t" "use parity_reduce_spec_t"; do
  if grep -q "$want" "$tmp/out"; then
    pass=$((pass + 1))
  else
    echo "FAIL: no deprecation warning saying '$want'"; fail=$((fail + 1))
  fi
done
if "$CC" "${flags[@]}" -DPARITY_NO_DEPRECATED "$src" >"$tmp/off" 2>&1; then
  echo "FAIL: old_names.c compiles with PARITY_NO_DEPRECATED"; fail=$((fail + 1))
elif grep -q "parity_st_open_mem" "$tmp/off"; then
  pass=$((pass + 1))
else
  echo "FAIL: the PARITY_NO_DEPRECATED compile fails for another reason:"; head -20 "$tmp/off"; fail=$((fail + 1))
fi
echo "deprecated_names_warn: $pass passed, $fail failed"
[ "$fail" = 0 ]
