#!/usr/bin/env bash
# `mypy --strict` over the Python package (python/parity, the configuration in pyproject.toml's
# [tool.mypy]: strict, torch and ml_dtypes not followed), issue #40: the public API is typed and
# the package ships py.typed. Static: needs neither the build nor the bridge.
# Skips (77) when the Python cannot import mypy (scripts/deps.sh installs it into .venv).
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
if ! "$PY" -c 'import mypy' 2>/dev/null; then
  echo "skip: $PY cannot import mypy (make deps-test, or .venv/bin/pip install mypy)"
  exit 77
fi
fail=0
[ -f "$SRC/python/parity/py.typed" ] || { echo "FAIL: python/parity/py.typed is missing"; fail=1; }
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
# The package's own folder, run from the source root so that pyproject.toml's files= applies.
if ! (cd "$SRC" && "$PY" -m mypy --config-file pyproject.toml --cache-dir "$cache" --no-error-summary); then
  echo "FAIL: mypy --strict reports errors in python/parity (above)"
  fail=1
fi
[ $fail = 0 ] && echo "mypy --strict: python/parity clean"
exit $fail
