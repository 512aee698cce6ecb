#!/usr/bin/env bash
# Long (label "long"): issue #36's table of the cause classifier. Every catalog kernel of the 13
# ops plus realistic PyTorch bugs (tests/cause_realistic.py), quick workloads, seed 1: the
# kernel-level cause against the planted one. It fails unless at least 90% of the rows are right
# and no wrong word comes with match >= 0.9 (tests/cause_table.py --check). About 10 minutes on 2
# cores. Without torch in PARITY_PYTHON the realistic rows are left out (said so).
set -u
: "${PARITY:?}" "${PARITY_SRC:?}" "${PARITY_BUILD:?}"
PY=${PARITY_PYTHON:-python3}
LIB="$PARITY_BUILD/python/libparity_python.so"
args=(--parity "$PARITY" --check)
if [ ! -f "$LIB" ]; then
  echo "SKIP: no $LIB (the Python bridge is not built)"
  exit 77
fi
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "note: no torch in $PY: the realistic PyTorch bugs are left out of the table"
  args+=(--no-realistic)
fi
PYTHONPATH="$PARITY_SRC/python" PARITY_PY_LIB="$LIB" "$PY" "$PARITY_SRC/tests/cause_table.py" "${args[@]}"
