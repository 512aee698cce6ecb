"""Shared pieces of the package's tests: the implementations under test live in kernels.py (a
module, so isolate=True can pickle them by reference)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except Exception:
    HAVE_TORCH = False

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not importable here")
HAVE_CUDA = HAVE_TORCH and torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device: GPU case skipped")


def cli():
    """The parity CLI of this build ($PARITY from ctest), or None."""
    p = os.environ.get("PARITY")
    return p if p and os.path.exists(p) else None


needs_cli = pytest.mark.skipif(cli() is None, reason="$PARITY (the CLI of this build) is not set")
