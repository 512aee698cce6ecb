#!/usr/bin/env bash
# Everything of parity that needs a GPU, in one short run that prints one table:
#   1. the CUDA example plugin (examples/cuda/): fp32_atomic and fp32_segmented faithful, bf16_atomic
#      (the incident) unfaithful on Zipf and real-text ids, through `parity check`;
#   2. parity.check on CUDA tensors (torch kernels computed on the device; the Python package);
#   3. a Triton kernel, where Triton imports (RMSNorm forward, and the same with the wrong eps).
# Without a GPU it says so and exits 77, touching nothing. Exit 0 when every row is as expected,
# 1 when one is not, 2 on a usage error, 3 when the build fails.
#
#   scripts/gpu-check.sh [--build DIR] [--python PY] [--cpu-dry-run]
#
# --build DIR      where parity is (or will be) built with the CUDA plugin (default build-gpu;
#                  a DIR already holding parity and examples/libparity_cuda_example.so is used
#                  as it is, so a build made elsewhere can be carried to the GPU machine)
# --python PY      the Python that holds torch (default: python3)
# --cpu-dry-run    no GPU needed: run the Python rows on CPU tensors and skip the CUDA rows, to
#                  test this script itself (tests/cli_gpu_check.sh)
# Libraries the GPU machine lacks (libcjson, libpcre2) can travel in DIR/lib: it goes first on
# LD_LIBRARY_PATH. Takes about a minute after the build on an H200.
set -u
cd "$(dirname "$0")/.."
B=build-gpu
PY=python3
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) B=${2:?--build needs a folder}; shift 2 ;;
    --python) PY=${2:?--python needs an interpreter}; shift 2 ;;
    --cpu-dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see scripts/gpu-check.sh --help)" >&2; exit 2 ;;
  esac
done

if [ $dry = 0 ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; }; then
  echo "gpu-check: no GPU on this machine (nvidia-smi lists none): nothing was run."
  echo "gpu-check: run it where a GPU is; --cpu-dry-run tests the script itself on CPU tensors."
  exit 77
fi
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

log=$(mktemp)
trap 'rm -f "$log" "$log".*' EXIT
if [ ! -x "$B/parity" ] || { [ $dry = 0 ] && [ ! -f "$B/examples/libparity_cuda_example.so" ]; } ||
   [ ! -f "$B/python/libparity_python.so" ]; then
  cuda=ON; [ $dry = 1 ] && cuda=AUTO
  echo "gpu-check: building in $B (PARITY_CUDA=$cuda)..."
  if ! { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DPARITY_CUDA=$cuda -DBUILD_TESTING=OFF &&
         cmake --build "$B" -j "$(nproc)"; } >"$log" 2>&1; then
    tail -30 "$log"; echo "gpu-check: the build failed (log above)" >&2; exit 3
  fi
fi

rows=$log.rows
: >"$rows"
# 1. The CUDA example plugin through the CLI.
if [ $dry = 1 ]; then
  echo "cuda plugin (all kernels)|-|skipped: --cpu-dry-run|skip" >>"$rows"
else
  LIB=$B/examples/libparity_cuda_example.so
  for wl in zipf1.1 text uniform; do
    "$B/parity" check embedding_rmsnorm_bwd --kernel "$LIB" --workload "$wl" --quick -q --no-floor \
      --json "$log.json" >"$log.out" 2>&1
    rc=$?
    if [ ! -s "$log.json" ]; then
      echo "cuda plugin on $wl|report|error: exit $rc, no JSON|FAIL" >>"$rows"; cat "$log.out"; continue
    fi
    "$PY" - "$log.json" "$wl" >>"$rows" <<'PYEOF'
import json, sys
wl = sys.argv[2]
for k in json.load(open(sys.argv[1]))["kernels"]:
    name = k["name"].rsplit(":", 1)[1]
    # one hit per row under uniform ids: bf16 atomics lose nothing there (the benchmarks' regime)
    want = "faithful" if name.startswith("fp32") or wl == "uniform" else "unfaithful"
    q = max((w.get("max_err_over_tol", 0) for w in k.get("workloads", [])), default=float("nan"))
    print("cuda plugin %s on %s|%s|%s (err/tol %.3g)|%s" % (name, wl, want, k["verdict"], q,
          "ok" if k["verdict"] == want else "FAIL"))
PYEOF
    rm -f "$log.json"
  done
fi

# 2 and 3: the Python package on device tensors, and Triton.
dev=cuda; [ $dry = 1 ] && dev=cpu
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PARITY_PY_LIB="$PWD/$B/python/libparity_python.so" \
  "$PY" scripts/gpu_check.py --device $dev >"$log.py" 2>&1
prc=$?
if [ $prc = 77 ]; then
  echo "python rows|-|skipped: $(grep -m1 '^skip' "$log.py")|skip" >>"$rows"
else
  grep ' | ' "$log.py" | sed 's/ *| */|/g' >"$log.pyrows"
  cat "$log.pyrows" >>"$rows"
  # exit 1 is a row that failed; any other exit, or no row at all, is the script failing
  if { [ $prc != 0 ] && [ $prc != 1 ]; } || [ ! -s "$log.pyrows" ]; then
    cat "$log.py"; echo "python rows|-|error: exit $prc, $(wc -l <"$log.pyrows") rows|FAIL" >>"$rows"
  fi
fi

echo
gpu=$(nvidia-smi -L 2>/dev/null | head -1)
echo "gpu-check: ${gpu:-no GPU (--cpu-dry-run)}"
column -t -s '|' -o ' | ' -N check,expected,got,ok "$rows" 2>/dev/null || tr '|' '\t' <"$rows"
nfail=$(grep -c '|FAIL$' "$rows")
nok=$(grep -c '|ok$' "$rows")
nskip=$(grep -c '|skip$' "$rows")
echo "gpu-check: $nok passed, $nfail failed, $nskip skipped"
[ "$nfail" = 0 ]
