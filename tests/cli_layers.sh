#!/usr/bin/env bash
# The layers (docs/architecture.md): the library under src/ never includes a header of the ops
# (ops/): it reads them through src/op/registry.h, which ops/registry.c implements. Reads the
# sources as text, so it holds in a clean clone and in a tarball alike (no git needed).
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
if grep -rn --include='*.c' --include='*.h' '#include "ops/' "$S/src" >"$tmp/up"; then
  bad "src/ includes ops/ (a library module reaching up into the ops):"
  cat "$tmp/up"
else ok; fi
# and the registry is the one place that expands ops/ops.def into tables
n=$(grep -rln --include='*.c' '#include "ops/ops.def"' "$S/src" "$S/ops" "$S/programs" | wc -l)
[ "$n" = 1 ] && grep -q '#include "ops/ops.def"' "$S/ops/registry.c" && ok ||
  bad "ops/ops.def expanded in $n .c files, want ops/registry.c alone"
echo "cli_layers: $pass passed, $fail failed"
[ "$fail" = 0 ]
