#!/usr/bin/env bash
# Make sure the Debian packages parity needs are present. As root it installs what is missing
# (apt-get); otherwise it prints the exact command to run and exits 1.
# It also prepares .venv (Python with ml_dtypes + numpy, and Debian's torch when present) for the
# oracle tests and benchmarks; that part is best-effort: without it those tests skip visibly.
set -u
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libcjson-dev libcmocka-dev libpcre2-dev
      python3 python3-numpy python3-venv python3-pip python3-torch
      clang libclang-rt-14-dev libopenmpi-dev openmpi-bin)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || {
      echo "deps: apt-get install failed; run it by hand: apt-get install -y ${missing[*]}" >&2
      exit 1
    }
  else
    echo "deps: missing Debian packages. Run this, then try again:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# Oracle Python: Debian's python3 (numpy, torch) plus ml_dtypes from PyPI, in .venv. numpy is pinned
# to Debian's version: a newer numpy from PyPI would shadow it and break Debian's torch 1.13.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import ml_dtypes, numpy, safetensors' 2>/dev/null; then
  if /usr/bin/python3 -m venv --system-site-packages .venv >/dev/null 2>&1 &&
     .venv/bin/python -m pip install -q --disable-pip-version-check \
       "numpy==$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')" ml_dtypes safetensors >/dev/null 2>&1; then
    echo "deps: .venv ready (ml_dtypes $(.venv/bin/python -c 'import ml_dtypes; print(ml_dtypes.__version__)'))" >&2
  else
    echo "deps: note: could not prepare .venv with ml_dtypes (no network to PyPI?);" >&2
    echo "      oracle tests will be skipped. To retry: /usr/bin/python3 -m venv --system-site-packages .venv && .venv/bin/pip install ml_dtypes" >&2
  fi
fi
exit 0
