#!/usr/bin/env bash
# No call circles between source files (issue #39): file A "uses" file B when A's object file
# refers to a symbol B's object defines (nm -u against nm --defined-only -g). Within the library
# (the objects of parity_obj: src/ and ops/) and within the CLI (the objects of the parity program:
# programs/), every strongly connected component of more than one file is a circle, and fails
# naming its files. Two files that call each other both ways are one concept split in two, or a
# lower piece that should move down (docs/architecture.md); a new one is a regression. The Python
# package gets the same over its imports (tests/import_cycles.py). Reads the built objects, so it
# sees calls through macros and generated tables that a grep of the sources would miss. No header
# include circle either (tests/include_cycles.py).
. "$(dirname "$0")/lib_cli.sh"
S=${PARITY_SRC:?}
B=${PARITY_BUILD:?}
if ! command -v nm >/dev/null 2>&1; then
  echo "SKIP: nm not found (binutils): the call graph is read from the object files"
  exit 77
fi

# Circles known and not yet broken, one per line as the files of the component sorted and joined
# by spaces (the form the failure prints). Each needs its reason; keep it empty when possible.
# (src/custom's ring was the last: its trial state moved down into custom_trial.c, the case
# accessor into custom_op.c, the terms and the rounded intermediates' tolerance into
# custom_tol.c, the public constructors up into custom_engine.c.)
allowed=""

# cycles NAME DIR: the circles among the objects under DIR (a CMake target's object folder),
# printed one per line as their sorted source paths.
cycles() {
  local dir=$1 o rel
  : >"$tmp/objs"
  while IFS= read -r o; do
    rel=${o#"$dir"/}
    rel=${rel%.o}
    # an object whose source is gone (a file moved or deleted since this build folder was made)
    # is not part of the build: leave it out, or it would keep a broken circle alive
    [ -f "$S/$rel" ] && printf '%s\n' "$o" >>"$tmp/objs"
  done < <(find "$dir" -name '*.o' | LC_ALL=C sort)
  # one nm for all (-A: each line starts "OBJECT:"); the object's path less dir/ and .o is its source
  local strip="$dir/"
  xargs -r -d '\n' nm -A --defined-only -g <"$tmp/objs" |
    awk -v p="$strip" 'NF >= 3 { f = $1; sub(/:[^:]*$/, "", f); if (index(f, p) == 1) f = substr(f, length(p) + 1); sub(/\.o$/, "", f); print $NF, f }' >"$tmp/defs"
  xargs -r -d '\n' nm -A -u <"$tmp/objs" |
    awk -v p="$strip" '{ f = $1; sub(/:[^:]*$/, "", f); if (index(f, p) == 1) f = substr(f, length(p) + 1); sub(/\.o$/, "", f); print f, $NF }' >"$tmp/uses"
  # the edges file -> file, then the components: reach[a] by a walk from each file; a and b are
  # in one component when each reaches the other
  awk 'NR == FNR { def[$1] = $2; next }
       ($2 in def) && def[$2] != $1 { e[$1 " " def[$2]] = 1 }
       END { for (k in e) print k }' "$tmp/defs" "$tmp/uses" | LC_ALL=C sort >"$tmp/edges"
  awk '{ n[$1]++; adj[$1, n[$1]] = $2; node[$1]; node[$2] }
       END {
         for (a in node) {
           delete seen; top = 0; stack[++top] = a; seen[a] = 1
           while (top > 0) {
             x = stack[top--]
             for (i = 1; i <= n[x]; i++) { y = adj[x, i]; if (!(y in seen)) { seen[y] = 1; stack[++top] = y } }
           }
           for (b in seen) r[a, b] = 1
         }
         for (a in node) {
           if (a in done) continue
           m = a; cnt = 1
           for (b in node) if (b != a && ((a, b) in r) && ((b, a) in r)) { m = m "\n" b; cnt++; done[b] = 1 }
           if (cnt > 1) { cmd = "LC_ALL=C sort | paste -sd\" \" -"; print m | cmd; close(cmd) }
         }
       }' "$tmp/edges" | LC_ALL=C sort
}

check_target() {
  local what=$1 dir=$2 found c n=0
  if [ ! -d "$dir" ] || [ -z "$(find "$dir" -name '*.o' -print -quit)" ]; then
    bad "$what: no object files under $dir (built with another generator or layout?)"
    return
  fi
  found=$(cycles "$dir")
  while IFS= read -r c; do
    [ -n "$c" ] || continue
    if printf '%s\n' "$allowed" | grep -qxF -- "$c"; then continue; fi
    bad "$what: these files call each other in a circle: $c"
    n=$((n + 1))
  done <<<"$found"
  [ "$n" = 0 ] && ok
}

check_target library "$B/CMakeFiles/parity_obj.dir"
check_target programs "$B/CMakeFiles/parity.dir"

# the Python package: imports between python/parity modules, module-level or in a function;
# and the C headers: no include circle (tests/include_cycles.py)
PY=${PARITY_PYTHON:-python3}
if command -v "$PY" >/dev/null 2>&1; then
  if out=$("$PY" "$S/tests/import_cycles.py" "$S/python/parity" 2>&1); then ok; else
    bad "python/parity: $out"
  fi
  if out=$("$PY" "$S/tests/include_cycles.py" "$S" 2>&1); then ok; else
    bad "headers that include each other in a circle: $out"
  fi
else
  echo "note: no Python ($PY): the python/parity import and header include checks not run"
fi
echo "cli_cycles: $pass passed, $fail failed"
[ "$fail" = 0 ]
