"""C++ and CUDA solutions built with PyTorch's extension loader (docs/problems.md, "C++ and CUDA
solutions").

The benchmarks build a solution JSON whose language is `cpp` or `cuda` (FlashInfer-Bench,
SOL-ExecBench; SOL-ExecBench also lists `cuda_cpp`) with `spec.binding` "torch" the same way:
every source whose suffix is .cu/.cpp/.cc/.cxx/.c compiled into one extension module by
torch.utils.cpp_extension.load (the sources' folder on the include path, `spec.compile_options`'
cflags / cuda_cflags / ld_flags passed on, CUDA only for `cuda`), and the entry point's symbol
(after "::") taken from the module, which binds it with PYBIND11_MODULE(TORCH_EXTENSION_NAME,
m). A KernelBench ModelNew does the same with load_inline. `cpp` runs on the CPU here; `cuda`
needs a CUDA device (and a CUDA build of torch). The binding "tvm-ffi" (FlashInfer-Bench's
default for C++/CUDA when spec.binding is absent; SOL-ExecBench's is "torch") is not implemented:
its package is not a dependency of parity.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sysconfig
from typing import Any, Dict, List, Optional

from ._problem_oracle import ProblemFileError

CPP_LANGS = {"cpp"}                  # built and run on the CPU
CUDA_LANGS = {"cuda", "cuda_cpp"}    # built with CUDA, run on a CUDA device
SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")


_BUILT: Dict[str, Any] = {}  # module name (a hash of the sources and flags) -> the loaded extension


class BuildUnavailable(Exception):
    """This machine cannot build C++ (no compiler, ninja or Python headers): the solution is
    `unsupported` here, with the reason, not a bad file."""


def toolchain_missing() -> Optional[str]:
    """Why torch's extension loader cannot build here, or None. It needs a C++ compiler ($CXX or
    c++), ninja, Python's and torch's headers (Debian: g++, ninja-build, python3-dev, libtorch-dev,
    pybind11-dev)."""
    from torch.utils.cpp_extension import include_paths
    cxx = os.environ.get("CXX") or "c++"
    missing = [what for what, ok in (
        ("a C++ compiler (%s)" % cxx, shutil.which(cxx.split()[0]) is not None),
        ("ninja", shutil.which("ninja") is not None),
        ("Python's headers (Python.h)", os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))),
        ("torch's C++ headers (torch/extension.h)",
         any(os.path.isfile(os.path.join(d, "torch", "extension.h")) for d in include_paths())),
        ("pybind11's headers", any(os.path.isfile(os.path.join(d, "pybind11", "pybind11.h")) for d in
                                   include_paths() + [sysconfig.get_paths()["include"], "/usr/include",
                                                      "/usr/local/include"])),
    ) if not ok]
    if not missing:
        return None
    return ("building C++ needs %s, missing here (Debian: apt-get install g++ ninja-build python3-dev libtorch-dev pybind11-dev)"
            % ", ".join(missing))


def _tail(text: str, lines: int = 12) -> str:
    kept = [x for x in text.strip().splitlines() if x.strip()]
    return "\n".join(kept[-lines:])


def build_entry(path: str, folder: str, written: List[str], spec: Dict[str, Any], symbol: str, cuda: bool,
                default_binding: str) -> Any:
    """The callable `symbol` of the extension built from the C/C++/CUDA files among `written`
    (paths inside `folder`, the solution's sources). ProblemFileError names what is wrong with
    the solution (it does not build, binds no such symbol); BuildUnavailable says why this
    machine cannot build it."""
    binding = str(spec.get("binding") or default_binding).lower()
    if binding != "torch":
        raise BuildUnavailable("binding %s%s: parity builds C++/CUDA solutions bound with \"torch\" (torch's extension "
                               "loader); the %s binding is not implemented" % (
                                   binding, "" if spec.get("binding") else " (the format's default)", binding))
    why = toolchain_missing()
    if why:
        raise BuildUnavailable(why)
    srcs = [p for p in written if p.endswith(SUFFIXES) and (cuda or not p.endswith(".cu"))]
    if not srcs:
        raise ProblemFileError(path, "sources", "no C/C++ source (%s) to build" % ", ".join(SUFFIXES))
    opts = spec.get("compile_options") or {}
    if not isinstance(opts, dict):
        raise ProblemFileError(path, "spec.compile_options", "expected an object {cflags, cuda_cflags, ld_flags}")
    flags: Dict[str, List[str]] = {}
    for key in ("cflags", "cuda_cflags", "ld_flags"):
        v = opts.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ProblemFileError(path, "spec.compile_options.%s" % key, "expected a list of strings")
        flags[key] = v
    import torch
    h = hashlib.sha1()
    for p in sorted(written):  # every source, headers included, by its path in the solution
        with open(p, "rb") as f:
            h.update(os.path.relpath(p, folder).encode() + b"\0" + f.read() + b"\0")
    h.update(repr(sorted(flags.items())).encode() + (b"cuda" if cuda else b"cpu") + torch.__version__.encode())
    name = "parity_solution_%s" % h.hexdigest()[:16]
    # Sources and build in a folder named by the hash, so that the child process that runs the
    # solution (_problem_isolate), or a later run, finds the build done: torch's loader (ninja)
    # rebuilds what changed, and a source at another path is a change.
    build = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                         "parity", "extensions", name)
    home = os.path.join(build, "src")
    for p in written:
        dst = os.path.join(home, os.path.relpath(p, folder))
        with open(p, "rb") as f:
            data = f.read()
        try:
            with open(dst, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:  # rewritten only when different: its time stamp says "built" otherwise
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
    srcs = [os.path.join(home, os.path.relpath(p, folder)) for p in srcs]
    folder = home
    from torch.utils.cpp_extension import load
    try:
        mod = _BUILT.get(name) or load(name=name, sources=srcs, extra_include_paths=[folder], extra_cflags=flags["cflags"],
                   extra_cuda_cflags=flags["cuda_cflags"], extra_ldflags=flags["ld_flags"], with_cuda=cuda,
                   build_directory=build, verbose=False)
    except (RuntimeError, OSError, ImportError, ValueError) as e:
        raise ProblemFileError(path, "sources", "does not build (torch.utils.cpp_extension.load):\n%s"
                               % _tail(str(e))) from e
    _BUILT[name] = mod  # the same sources again in this process (another entry point) are not rebuilt
    fn = getattr(mod, symbol, None)
    if not callable(fn):
        raise ProblemFileError(path, "spec.entry_point", "the built extension binds no function %r (bind it with "
                               "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"%s\", ...); })" % (symbol, symbol))
    return fn
