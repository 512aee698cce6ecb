#!/usr/bin/env bash
# The pytest suite under a second Python environment -- current PyPI numpy 2.x and torch 2.x,
# beside the Debian 12 numpy 1.24 / torch 1.13 of .venv (issue #17: both must work). ctest:
# python_env2 (label python-env2). The environment is not created by the build (torch's PyPI
# wheels are gigabytes): create it as docs/python.md ("Two environments") says, then configure
# with -DPARITY_PYTHON2=/path/to/venv/bin/python or set PARITY_PYTHON2 when running ctest.
# Skips (77) with the reason when it is absent or is not numpy 2 + torch 2.
# usage: run_env2.sh [PYTHON]
PY=${PARITY_PYTHON2:-${1:-}}
if [ -z "$PY" ]; then
  echo "skip: no second environment (PARITY_PYTHON2 unset; docs/python.md 'Two environments' creates one)"
  exit 77
fi
if [ ! -x "$PY" ]; then
  echo "skip: PARITY_PYTHON2=$PY is not an executable (docs/python.md 'Two environments')"
  exit 77
fi
if ! v=$("$PY" -c 'import numpy, torch, pytest; print(numpy.__version__, torch.__version__)' 2>&1); then
  echo "skip: $PY cannot import numpy, torch and pytest: $v"
  exit 77
fi
set -- $v
case "$1:$2" in
  2.*:2.*) echo "second environment: numpy $1, torch $2 ($PY)" ;;
  *) echo "skip: $PY has numpy $1, torch $2: the second environment is numpy 2.x + torch 2.x"; exit 77 ;;
esac
exec bash "$(dirname "$0")/run_pytest.sh" "$PY"
