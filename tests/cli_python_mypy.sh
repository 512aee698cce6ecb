#!/usr/bin/env bash
# `mypy --strict` over the Python package (python/parity, the configuration in pyproject.toml's
# [tool.mypy]: strict, torch and ml_dtypes not followed), issue #40: the public API is typed and
# the package ships py.typed; examples/python type-check against the package. Static: needs
# neither the build nor the bridge.
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
# The examples use the typed public API only: their calls into parity are checked against its
# types (their own functions are untyped scripts: bodies checked, torch and pytest not followed;
# `misc` off for the quickstart's two conditional variants of one kernel).
cat >"$cache/examples.ini" <<'INI'
[mypy]
check_untyped_defs = True
ignore_missing_imports = True
disable_error_code = misc
[mypy-torch,torch.*,ml_dtypes,ml_dtypes.*,pytest,_pytest.*]
follow_imports = skip
INI
if ! (cd "$SRC" && MYPYPATH="$SRC/python" "$PY" -m mypy --config-file "$cache/examples.ini" --cache-dir "$cache" \
        --no-error-summary examples/python); then
  echo "FAIL: examples/python misuse the package's typed API (above)"
  fail=1
fi
[ $fail = 0 ] && echo "mypy --strict: python/parity clean; examples/python type-check against it"
exit $fail
