#!/usr/bin/env bash
# The Python package's pytest suite (ctest: python_pytest). Skips (77) when the Python given
# lacks numpy or pytest (scripts/deps.sh installs pytest into .venv); GPU cases skip visibly.
# usage: run_pytest.sh PYTHON [test_file.py ...]   (no files: the whole folder)
PY=${1:-python3}
shift
if ! "$PY" -c 'import numpy, pytest' 2>/dev/null; then
  echo "skip: $PY cannot import numpy and pytest (make deps installs pytest into .venv)"
  exit 77
fi
cd "$(dirname "$0")" || exit 1
[ $# -gt 0 ] || set -- .
exec "$PY" -m pytest -q -rs -p no:cacheprovider "$@"
