#!/usr/bin/env bash
# The layers (docs/architecture.md): the library under src/ never includes a header of the ops
# (ops/): it reads them through src/op/registry.h, which ops/registry.c implements. The bottom
# module src/core includes no header of another module; a module's private headers
# (src/<module>/*_impl.h) are included by that module alone, every other file (another module,
# the ops, the CLI, the Python bridge) reaching it through its internal headers
# (src/core/internal.h, src/verify/verify_internal.h, ...). Reads the sources as text, so it
# holds in a clean clone and in a tarball alike (no git needed).
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
# the bottom module: nothing under src/core includes a header of another module
if grep -rnE --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(src/[^"]*|ops/[^"]*)"' \
     "$S/src/core" | grep -vE '#[[:space:]]*include[[:space:]]*"src/core/' >"$tmp/core"; then
  bad "src/core (the bottom module) includes another module's header:"
  sed "s|^$S/||" "$tmp/core"
else ok; fi
# private headers: src/Y/*_impl.h is included only by the files of module Y (src/Y/); any other
# file of the library, the ops, the CLI or the Python bridge includes Y's internal headers instead
# (tests/ are white-box tests: they may include any header)
find "$S/src" "$S/ops" "$S/programs" "$S/python/csrc" -type f \( -name '*.c' -o -name '*.h' \) -print0 |
  LC_ALL=C sort -z | xargs -0 awk -v root="$S/" '
    FNR == 1 {
      rel = FILENAME
      if (substr(rel, 1, length(root)) == root) rel = substr(rel, length(root) + 1)
      mod = ""
      if (rel ~ /^src\/[^\/]+\//) { mod = substr(rel, 5); sub(/\/.*/, "", mod) }
    }
    match($0, /^[ \t]*#[ \t]*include[ \t]*"src\/[^\/"]+\/[^"]*_impl\.h"/) {
      inc = substr($0, RSTART, RLENGTH); sub(/^[^"]*"src\//, "", inc)
      y = inc; sub(/\/.*/, "", y)
      if (y != mod) print rel ":" FNR ":" $0
    }' >"$tmp/private"
if [ -s "$tmp/private" ]; then
  bad "another module's private header (src/<module>/*_impl.h) included; include its internal header:"
  cat "$tmp/private"
else ok; fi
echo "cli_layers: $pass passed, $fail failed"
[ "$fail" = 0 ]
