# Long: rebuilds data/stories260K_moe.bin from stories260K.bin (parity_model_moe_build with the
# default options) and requires the same bytes: the side file is a pure function of the
# checkpoint. About 7 s of CPU in Release, minutes under ASan. Runs the unit test binary with
# PARITY_LONG=1 (the fast suite checks the same construction on a short calibration instead).
set -u
bin="${PARITY_BUILD:?PARITY_BUILD must point at the build folder}/tests/test_model_moe"
if [ ! -x "$bin" ]; then echo "SKIP: $bin not built"; exit 77; fi
PARITY_LONG=1 exec "$bin"
