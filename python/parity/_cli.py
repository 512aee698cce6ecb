"""The `parity` command that `pip install .` puts on PATH ([project.scripts] in pyproject.toml).

The package carries the CLI binary itself (site-packages/parity/bin/parity, installed there by
the project's CMake with the library under lib/ and the shipped data under share/parity/). This
entry point replaces its own process with that binary (os.execv): same arguments, same standard
streams, same exit code and signals; nothing is parsed or printed here.

The binary finds its data from its own location (<prefix>/bin -> <prefix>/share/parity,
src/core/status.c's find_install_dir). It is statically linked, so that location comes from
argv[0] (glibc's dladdr names the main program by argv[0]): argv[0] is therefore the binary's
absolute path, never the bare name "parity" (which would send it to the configured prefix and
the build's source tree instead). $PARITY_DATA still comes first, as for any parity.

`python -m parity ...` does the same (parity/__main__.py). In a source tree without installing
(PYTHONPATH=python), the binary of a build tree beside it (build*/parity) is used, or
$PARITY_CLI when set.
"""
from __future__ import annotations

import glob
import os
import sys
from typing import Iterator, List, Optional, Sequence, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates() -> Iterator[str]:
    env = os.environ.get("PARITY_CLI")
    if env:
        yield env
    yield os.path.join(_HERE, "bin", "parity")          # pip install . (CMAKE_INSTALL_BINDIR)
    root = os.path.dirname(os.path.dirname(_HERE))       # the source tree, when run from python/
    for p in sorted(glob.glob(os.path.join(root, "build*", "parity"))):
        yield p


def binary() -> Tuple[Optional[str], List[str]]:
    """The absolute path of the parity CLI this package runs, or None with the paths tried."""
    tried: List[str] = []
    for p in _candidates():
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p), tried
        tried.append(p)
    return None, tried


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    exe, tried = binary()
    if exe is None:
        sys.stderr.write("parity: the package's CLI binary is missing (looked in: %s). Reinstall "
                         "with `pip install .` from the repository root, or set PARITY_CLI to a "
                         "parity binary\n" % ", ".join(tried))
        return 3  # parity's exit code for an input or I/O error
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + argv)  # does not return; raises OSError if the exec itself fails
