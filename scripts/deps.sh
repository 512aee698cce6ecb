#!/usr/bin/env bash
# Make sure the Debian packages parity needs are present, split by purpose:
#   scripts/deps.sh build   what the library and the CLI need to build (`make`, `make demo`)
#   scripts/deps.sh test    that, plus what the test suite uses (`make test`): cmocka, Python with
#                           numpy and torch (and torch's C++ headers, ninja, Python's headers: C++
#                           solutions built by parity problem), Open MPI, clang's libFuzzer; and .venv (Debian's Python
#                           plus ml_dtypes, safetensors and pytest from PyPI) for the oracle tests
# As root it installs what is missing (apt-get); otherwise it prints the exact command to run and
# exits 1 for build packages. A missing *test* package is not fatal for a normal user: its tests
# then report CTest "Skipped" with the reason, and this script prints the command that adds them.
# `scripts/deps.sh --list build|test` prints the package names and exits.
set -u
cd "$(dirname "$0")/.."

BUILD_PKGS=(build-essential cmake pkg-config libcjson-dev libpcre2-dev)
TEST_PKGS=(libcmocka-dev python3 python3-numpy python3-venv python3-pip python3-torch
           clang libclang-rt-14-dev libopenmpi-dev openmpi-bin libtorch-dev pybind11-dev ninja-build python3-dev)

mode=build
if [ "${1:-}" = "--list" ]; then
  case "${2:-}" in
    build) echo "${BUILD_PKGS[*]}"; exit 0 ;;
    test) echo "${BUILD_PKGS[*]} ${TEST_PKGS[*]}"; exit 0 ;;
    *) echo "usage: scripts/deps.sh [build|test] | --list build|test" >&2; exit 2 ;;
  esac
fi
case "${1:-build}" in
  build) mode=build ;;
  test) mode=test ;;
  *) echo "usage: scripts/deps.sh [build|test] | --list build|test" >&2; exit 2 ;;
esac

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

want=("${BUILD_PKGS[@]}")
[ "$mode" = test ] && want+=("${TEST_PKGS[@]}")
mapfile -t missing < <(missing_of "${want[@]}")

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps ($mode): installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
      echo "deps: apt-get install failed; run it by hand: apt-get install -y --no-install-recommends ${missing[*]}" >&2
      exit 1
    }
  else
    mapfile -t missing_build < <(missing_of "${BUILD_PKGS[@]}")
    echo "deps ($mode): missing Debian packages. Run this, then try again:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    if [ ${#missing_build[@]} -gt 0 ]; then exit 1; fi
    echo "deps: (only test packages are missing: the tests that need them will report Skipped)" >&2
  fi
fi

[ "$mode" = build ] && exit 0

# Oracle Python: Debian's python3 (numpy, torch) plus ml_dtypes, safetensors and pytest from PyPI,
# in .venv. numpy is pinned to Debian's version: a newer numpy from PyPI would shadow it and break
# Debian's torch 1.13.
PY_PKGS=(ml_dtypes safetensors pytest mypy)
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null &&
   { [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import ml_dtypes, numpy, safetensors, pytest' 2>/dev/null; }; then
  if /usr/bin/python3 -m venv --system-site-packages .venv >/dev/null 2>&1 &&
     .venv/bin/python -m pip install -q --disable-pip-version-check \
       "numpy==$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')" "${PY_PKGS[@]}" >/dev/null 2>&1; then
    echo "deps: .venv ready (ml_dtypes $(.venv/bin/python -c 'import ml_dtypes; print(ml_dtypes.__version__)'))" >&2
  else
    echo "deps: note: could not prepare .venv with ${PY_PKGS[*]} (no network to PyPI?);" >&2
    echo "      the oracle and Python tests will report Skipped. To retry:" >&2
    echo "      /usr/bin/python3 -m venv --system-site-packages .venv && .venv/bin/pip install ${PY_PKGS[*]}" >&2
  fi
fi
exit 0
