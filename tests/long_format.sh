# Long: the fast fp32 -> bf16 / fp16 / e4m3fn paths against the exact encoder over all 2^32 fp32
# bit patterns (about 10 minutes on one core). Runs the unit test binary with PARITY_LONG=1.
set -u
bin="${PARITY_BUILD:?PARITY_BUILD must point at the build folder}/tests/test_format"
if [ ! -x "$bin" ]; then echo "SKIP: $bin not built"; exit 77; fi
PARITY_LONG=1 exec "$bin"
