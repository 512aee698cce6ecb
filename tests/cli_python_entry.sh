#!/usr/bin/env bash
# The `parity` command that `pip install .` puts on PATH (pyproject.toml's [project.scripts],
# python/parity/_cli.py), without pip or a network: the package laid out as the wheel lays it
# (site-packages/parity/{*.py, bin/parity, lib/libparity_python.so, share/parity/}) from this
# build, and the launcher pip writes for the declared entry point, called by its bare name
# from another folder. It must run the bundled binary with the same argv, output and exit
# code, and the binary must read the bundled data. (.ci/run does the real `pip install .`.)
# Skips (77) when the Python cannot import numpy (the package's one hard dependency).
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:?}
BUILD=${PARITY_BUILD:?}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "skip: $PY cannot import numpy (the Python package's one hard dependency)"
  exit 77
fi
PYABS=$(command -v "$PY")
BRIDGE=$BUILD/python/libparity_python.so
[ -f "$BRIDGE" ] || { echo "skip: $BRIDGE not built"; exit 77; }
. "$(dirname "$0")/lib_cli.sh"
tmp=$(cd "$tmp" && pwd -P)
preload_sanitizers "$BRIDGE"

# The entry point as declared, e.g. parity = "parity._cli:main".
ep=$(sed -n '/^\[project\.scripts\]/,/^\[/s/^parity *= *"\(.*\)"/\1/p' "$SRC/pyproject.toml")
[ -n "$ep" ] && ok || { bad "pyproject.toml declares no [project.scripts] parity"; ep=parity._cli:main; }

# The installed layout (CMake's install under wheel.install-dir = "parity").
pkg=$tmp/site/parity
mkdir -p "$pkg/bin" "$pkg/lib" "$pkg/share/parity" "$tmp/bin" "$tmp/elsewhere"
cp "$SRC"/python/parity/*.py "$pkg/"
cp "$P" "$pkg/bin/parity"
cp "$BRIDGE" "$pkg/lib/"
cp "$SRC"/data/* "$pkg/share/parity/"
# The launcher pip writes for a console script (pip's own template).
cat >"$tmp/bin/parity" <<EOF
#!$PYABS
# -*- coding: utf-8 -*-
import re
import sys
from ${ep%%:*} import ${ep##*:}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\.pyw|\.exe)?\$', '', sys.argv[0])
    sys.exit(${ep##*:}())
EOF
chmod +x "$tmp/bin/parity"

# Run in another folder, the package found on PYTHONPATH as in site-packages, nothing pointing
# at the build: the bridge and the binary must come from the package.
run() { (cd "$tmp/elsewhere" && env -u PARITY_DATA -u PARITY_PY_LIB -u PARITY_CLI \
         PYTHONPATH="$tmp/site" PATH="$tmp/bin:$PATH" "$@"); }

out=$(run parity --version); rc=$?
[ $rc = 0 ] && [ "$out" = "$("$P" --version)" ] && ok || bad "parity --version: exit $rc, '$out'"
[ "$(run sh -c 'command -v parity')" = "$tmp/bin/parity" ] && ok || bad "parity is not the launcher on PATH"

# argv and stdout unchanged, byte for byte (arguments with spaces and signs included).
run parity round --format bf16 1.00390625 -3.14159 "  2.5" >"$tmp/a.txt" 2>&1; rc=$?
"$P" round --format bf16 1.00390625 -3.14159 "  2.5" >"$tmp/b.txt" 2>&1; want=$?
[ $rc = $want ] && cmp -s "$tmp/a.txt" "$tmp/b.txt" && ok || bad "parity round differs from the binary's (exit $rc vs $want)"

# Exit codes: 0, 1 (a verdict failed), 2 (usage), 3 (input), as the binary's.
run parity check embedding_rmsnorm_bwd --kernel builtin:fp32_seq --workload text --quick >"$tmp/ok.txt" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "faithful" "$tmp/ok.txt" && ok || { bad "check fp32_seq on text: exit $rc, want 0"; cat "$tmp/ok.txt"; }
run parity check embedding_rmsnorm_bwd --kernel builtin:bf16_accum --workload text --quick --no-floor -q >/dev/null 2>&1; rc=$?
[ $rc = 1 ] && ok || bad "check bf16_accum: exit $rc, want 1"
run parity no-such-command >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok || bad "unknown command: exit $rc, want 2"
run parity compare embedding_rmsnorm_bwd "$tmp/none.st" "$tmp/none2.st" 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "none.st" "$tmp/err" && ok || bad "missing file: exit $rc, want 3: $(cat "$tmp/err")"

# The bundled data: the installed data folder the binary reports is the package's, and it is the
# one read (an empty bundled model file is the error, though the source tree's data/ is intact).
run parity --help 2>&1 | grep -q "installed data folder  $pkg/share/parity\$" && ok ||
  bad "parity --help does not name $pkg/share/parity: $(run parity --help 2>&1 | grep 'data folder')"
: >"$pkg/share/parity/stories260K.bin"
run parity model run -n 5 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "$pkg/share/parity/stories260K.bin" "$tmp/err" && ok ||
  bad "model run did not read the bundled stories260K.bin: exit $rc: $(cat "$tmp/err")"
cp "$SRC/data/stories260K.bin" "$pkg/share/parity/"

# python -m parity is the same command.
out=$(run "$PY" -m parity --version); rc=$?
[ $rc = 0 ] && [ "$out" = "$("$P" --version)" ] && ok || bad "python -m parity --version: exit $rc, '$out'"

# A package without its binary: exit 3 and a message naming where it looked.
rm "$pkg/bin/parity"
run parity --version >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 3 ] && grep -q "$pkg/bin/parity" "$tmp/err" && ok || bad "missing binary: exit $rc: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
