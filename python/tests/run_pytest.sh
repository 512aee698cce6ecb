#!/usr/bin/env bash
# The Python package's pytest suite (ctest: python_pytest). Skips (77) when the Python given
# lacks numpy or pytest (scripts/deps.sh installs pytest into .venv); GPU cases skip visibly.
# usage: run_pytest.sh PYTHON [test_file.py ...]   (no files: the whole folder)
PY=${1:-python3}
shift
if ! "$PY" -c 'import numpy, pytest' 2>/dev/null; then
  echo "skip: $PY cannot import numpy and pytest (make test, or make deps-test, prepares .venv with numpy and pytest)"
  exit 77
fi
# A sanitizer build's bridge can only be loaded by a process whose first libraries are the
# sanitizer runtimes: preload them (leak checks off: the interpreter itself is not leak-clean;
# SIGSEGV left to the process, so a crashing function still dies of it under isolate=True).
if [ -n "${PARITY_PY_LIB:-}" ] && ldd "$PARITY_PY_LIB" 2>/dev/null | grep -q 'libasan'; then
  rt=$(ldd "$PARITY_PY_LIB" | awk '/libasan|libubsan/ && /=>/ {print $3}' | sort | paste -sd: -)
  export LD_PRELOAD="$rt${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="detect_leaks=0:handle_segv=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
cd "$(dirname "$0")" || exit 1
[ $# -gt 0 ] || set -- .
exec "$PY" -m pytest -q -rs -p no:cacheprovider "$@"
