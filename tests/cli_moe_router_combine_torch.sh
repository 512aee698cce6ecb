#!/usr/bin/env bash
# moe_router_combine through the file-based flow with PyTorch (examples/pytorch/
# moe_router_combine.py): an independent fp32 implementation with a stable sort (ties to the
# lower id) is judged faithful on two workloads; torch.topk, whose tie order is
# implementation-defined, fails on the tied tokens of bf16-ties on this CPU build (a selection
# error, checked when it fails). Skips (77) without torch.
PY=${PARITY_PYTHON:-python3}
SRC=${PARITY_SRC:?}
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip: $PY cannot import torch (make test, or make deps-test, prepares .venv with it)"
  exit 77
fi
. "$(dirname "$0")/lib_cli.sh"
OP=moe_router_combine
for wl in bf16-ties@512x32x128 e256-top8@128x16x256; do
  "$P" gen $OP --workload $wl --out "$tmp/in.st" >/dev/null 2>&1 && ok || bad "gen $wl"
  "$PY" "$SRC/examples/pytorch/moe_router_combine.py" "$tmp/in.st" "$tmp/s.st" --variant stable || bad "pytorch stable"
  "$P" compare $OP "$tmp/in.st" "$tmp/s.st" --no-floor >"$tmp/s.txt" 2>&1 && ok || { bad "stable sort not faithful on $wl"; cat "$tmp/s.txt"; }
done
"$P" gen $OP --workload bf16-ties@512x32x128 --out "$tmp/in.st" >/dev/null 2>&1
"$PY" "$SRC/examples/pytorch/moe_router_combine.py" "$tmp/in.st" "$tmp/t.st" --variant topk || bad "pytorch topk"
"$P" compare $OP "$tmp/in.st" "$tmp/t.st" --no-floor >"$tmp/t.txt" 2>&1
rc=$?
# torch.topk's tie order is implementation-defined, so its verdict is not asserted; where it fails
# (this CPU build: 70 of 1024 rows), the failure must be a selection error, not arithmetic.
if [ $rc = 1 ]; then
  grep -q "gates row .* ref 0$" "$tmp/t.txt" && ok || bad "torch.topk failed, but not on a wrongly selected gate"
elif [ $rc = 0 ]; then
  echo "note: torch.topk broke every boundary tie toward the lower id on this build"
else
  bad "torch.topk compare: exit $rc"
fi
echo "cli_moe_router_combine_torch: $pass passed, $fail failed"
[ $fail = 0 ]
