#!/usr/bin/env bash
# The suite's Python is looked for at every configure (issue #34): `make demo` configures before
# `make test` has made .venv, and the Python found then must not stick, or every test that needs
# .venv's packages (ml_dtypes, safetensors, pytest) reports Skipped. Replayed here on a copy of the
# tracked sources: configure without .venv, make a .venv, configure the same build folder again.
# Also: the build that runs this suite uses .venv's Python when .venv exists and nothing pins one.
. "$(dirname "$0")/lib_cli.sh"
SRC=${PARITY_SRC:?}
command -v cmake >/dev/null || { echo "skip: no cmake on PATH"; exit 77; }
command -v git >/dev/null && git -C "$SRC" rev-parse >/dev/null 2>&1 ||
  { echo "skip: $SRC is not a git checkout (the copy is made from its tracked files)"; exit 77; }
mkdir "$tmp/src"
git -C "$SRC" ls-files -z | (cd "$SRC" && xargs -0 cp --parents -t "$tmp/src")
conf() { cmake -S "$tmp/src" -B "$tmp/src/b" -DPARITY_CUDA=OFF 2>&1 | sed -n 's/^-- parity: tests use Python //p'; }
first=$(conf)
[ -n "$first" ] && [ "$first" != "$tmp/src/.venv/bin/python" ] && ok || bad "without .venv: tests use '$first'"
mkdir -p "$tmp/src/.venv/bin" && ln -s "$(command -v python3)" "$tmp/src/.venv/bin/python"
second=$(conf)
[ "$second" = "$tmp/src/.venv/bin/python" ] && ok || bad "after .venv was made, the same build folder still uses '$second'"
third=$(cmake -S "$tmp/src" -B "$tmp/src/b" -DPARITY_PYTHON=/bin/true 2>&1 | sed -n 's/^-- parity: tests use Python //p')
[ "$third" = /bin/true ] && ok || bad "-DPARITY_PYTHON=/bin/true is not used: '$third'"

# This suite's own build.
pinned=$(sed -n 's/^PARITY_PYTHON:FILEPATH=//p' "${PARITY_BUILD:?}/CMakeCache.txt")
if [ -x "$SRC/.venv/bin/python" ] && [ -z "$pinned" ]; then
  [ "${PARITY_PYTHON:-}" = "$SRC/.venv/bin/python" ] && ok || bad ".venv exists but the suite uses ${PARITY_PYTHON:-}"
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
