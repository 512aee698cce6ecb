#!/usr/bin/env bash
# examples/pytorch/*.py need PyTorch and numpy only, not the `safetensors` package (issue #34: the
# README's `python examples/pytorch/fused_bwd.py in.safetensors out.safetensors` must work with
# Debian's python3-torch and nothing from PyPI): with safetensors hidden, each example reads
# `parity gen`'s file and writes outputs `parity compare` judges (fused_bwd: faithful passes,
# bf16_accum fails; attention, gemm and MoE faithful variants pass); with torch hidden, each one
# exits 3 with a message naming PyTorch and the interpreter, not a traceback. Where this Python
# has safetensors, the files are also checked against it (examples/pytorch/st_io.py's reader and
# writer). Skips (77) when the Python lacks torch (only the message is checked then) or numpy.
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:?}
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "skip: $PY cannot import numpy"
  exit 77
fi
. "$(dirname "$0")/lib_cli.sh"
EX=$SRC/examples/pytorch
mkdir -p "$tmp/hide_st" "$tmp/hide_torch"
printf 'import sys\nsys.modules["safetensors"] = None  # as if not installed\n' >"$tmp/hide_st/sitecustomize.py"
printf 'import sys\nsys.modules["torch"] = None  # as if not installed\n' >"$tmp/hide_torch/sitecustomize.py"
nost() { PYTHONPATH="$tmp/hide_st" "$PY" "$@"; }
notorch() { PYTHONPATH="$tmp/hide_torch" "$PY" "$@"; }

# Without torch: exit 3 and a message naming what is missing, for every example.
for f in fused_bwd attention gemm_torch moe_router_combine; do
  notorch "$EX/$f.py" "$tmp/none.st" "$tmp/o.st" >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc = 3 ] && grep -q "needs PyTorch" "$tmp/err" && grep -q "$PY\|python" "$tmp/err" && ! grep -q Traceback "$tmp/err" && ok ||
    bad "$f.py without torch: exit $rc: $(cat "$tmp/err")"
done
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "$pass passed, $fail failed"
  [ $fail = 0 ] || exit 1
  echo "skip: $PY cannot import torch (the examples themselves were not run)"
  exit 77
fi
nost -c 'import safetensors' 2>/dev/null && bad "safetensors could not be hidden"

# fused_bwd.py, the README tour's line: faithful passes, bf16_accum fails.
OP=embedding_rmsnorm_bwd
"$P" gen $OP --workload text --out "$tmp/in.st" 2>/dev/null && ok || bad "gen $OP"
for v in faithful bf16_accum; do
  (cd "$tmp" && nost "$EX/fused_bwd.py" in.st $v.st --variant $v) && ok || bad "fused_bwd.py --variant $v failed without safetensors"
  "$P" compare $OP "$tmp/in.st" "$tmp/$v.st" --no-floor >"$tmp/$v.txt" 2>&1; rc=$?
  want=0; [ $v = bf16_accum ] && want=1
  [ $rc = $want ] && ok || { bad "compare of fused_bwd.py's $v outputs: exit $rc, want $want"; cat "$tmp/$v.txt"; }
done

# The other examples, small workloads, their faithful variants.
while read -r op wl file variant; do
  "$P" gen "$op" --workload "$wl" --out "$tmp/i.st" >/dev/null 2>&1 && ok || bad "gen $op $wl"
  nost "$EX/$file" "$tmp/i.st" "$tmp/o.st" --variant "$variant" && ok || bad "$file --variant $variant failed without safetensors"
  "$P" compare "$op" "$tmp/i.st" "$tmp/o.st" --no-floor >"$tmp/c.txt" 2>&1; rc=$?
  [ $rc = 0 ] && ok || { bad "compare of $file's $variant outputs on $op $wl: exit $rc, want 0"; cat "$tmp/c.txt"; }
done <<'EOF'
gemm odd-k1000 gemm_torch.py fp32
gemm_bwd train-varlen gemm_torch.py fp32
attention_fwd x1e-3 attention.py fp32
moe_router_combine bf16-ties@512x32x128 moe_router_combine.py stable
EOF

# The files agree with huggingface's safetensors, both ways, where this Python has it.
if "$PY" -c 'import safetensors' 2>/dev/null; then
  "$PY" - "$EX" "$tmp" <<'PYEOF' && ok || bad "st_io and safetensors disagree"
import os, sys
import torch
sys.path.insert(0, sys.argv[1])
import st_io
from safetensors import safe_open
from safetensors.torch import load_file, save_file
d = sys.argv[2]
for fn in ("in.st", "faithful.st", "bf16_accum.st", "i.st", "o.st"):
    p = os.path.join(d, fn)
    a, meta = st_io.load(p)
    b = load_file(p)
    with safe_open(p, "pt") as f:
        assert meta == (f.metadata() or {}), fn
    assert a.keys() == b.keys(), fn
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), (fn, k)
t = {"f64": torch.randn(3, 5, dtype=torch.float64), "f32": torch.randn(7), "f16": torch.randn(2, 3).half(),
     "bf16": torch.randn(5, 3).bfloat16(), "i64": torch.arange(5), "i32": torch.arange(3, dtype=torch.int32),
     "i16": torch.arange(3, dtype=torch.int16), "i8": torch.arange(-3, 3, dtype=torch.int8),
     "u8": torch.arange(9, dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
     "empty": torch.zeros(0, 4), "scalar": torch.tensor(2.5), "strided": torch.randn(4, 6)[:, ::2]}
st_io.save(t, os.path.join(d, "rt.st"), {"k": "v"})
save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(d, "ref.st"), metadata={"k": "v"})
for p, reader in (("rt.st", load_file), ("ref.st", lambda p: st_io.load(p)[0])):
    got = reader(os.path.join(d, p))
    for k, v in t.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v.contiguous()), (p, k)
PYEOF
else
  echo "note: $PY has no safetensors; the files were not cross-checked against it"
fi

# A malformed file: a ValueError naming it, not a crash.
printf 'junk' >"$tmp/junk.st"
nost "$EX/fused_bwd.py" "$tmp/junk.st" "$tmp/o.st" 2>"$tmp/err"; rc=$?
[ $rc != 0 ] && grep -q "junk.st: 4 bytes, not a safetensors file" "$tmp/err" && ok || bad "junk input: exit $rc: $(tail -1 "$tmp/err")"
head -c 300 "$tmp/in.st" >"$tmp/trunc.st"
nost "$EX/fused_bwd.py" "$tmp/trunc.st" "$tmp/o.st" 2>"$tmp/err"; rc=$?
[ $rc != 0 ] && grep -q "trunc.st" "$tmp/err" && ok || bad "truncated input: exit $rc: $(tail -1 "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
