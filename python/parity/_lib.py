"""Loading the bridge library (python/csrc/bridge.c) with ctypes and declaring its functions.

Looked for, in order: $PARITY_PY_LIB; the copy installed inside this package (pip install .
puts it under parity/lib/); a build tree beside the source tree (build*/python/). ctypes rather
than a compiled extension: the bridge has no Python or numpy ABI in it, so one build serves
every Python, numpy 1.x and 2.x and torch version (docs/python.md, "Why ctypes").
"""
from __future__ import annotations

import ctypes
import glob
import itertools
import json
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "libparity_python.so"


def _candidates() -> Iterator[str]:
    env = os.environ.get("PARITY_PY_LIB")
    if env:
        yield env
    for pat in ("lib/" + _NAME, "lib*/" + _NAME, "lib*/*/" + _NAME):
        for p in sorted(glob.glob(os.path.join(_HERE, pat))):
            yield p
    root = os.path.dirname(os.path.dirname(_HERE))  # the source tree, when run from python/
    for p in sorted(glob.glob(os.path.join(root, "build*", "python", _NAME))):
        yield p


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    for p in _candidates():
        if os.path.exists(p):
            return ctypes.CDLL(p)
        tried.append(p)
    raise ImportError("parity: cannot find %s (looked in: %s). Install the package with "
                      "`pip install .` from the repository root, or build it (cmake --build build) "
                      "and set PARITY_PY_LIB=build/python/%s" % (_NAME, ", ".join(tried) or "-", _NAME))


lib = _load()

_c = ctypes
_P = _c.c_void_p
_S = _c.c_char_p
_SIGS: Dict[str, Tuple[Any, List[Any]]] = {
    "parity_py_free": (None, [_P]),
    "parity_py_memeq": (_c.c_int, [_P, _P, _c.c_size_t]),
    "parity_py_op_count": (_c.c_int, []),
    "parity_py_op_name": (_S, [_c.c_int]),
    "parity_py_op_json": (_P, [_S]),
    "parity_py_case_new": (_P, [_S, _S, _c.c_uint64, _S, _c.c_char_p, _c.c_size_t]),
    "parity_py_case_free": (None, [_P]),
    "parity_py_case_json": (_P, [_P]),
    "parity_py_case_input": (_P, [_P, _c.c_int]),
    "parity_py_case_input_hash": (_c.c_uint64, [_P, _c.c_int]),
    "parity_py_case_input_guards_ok": (_c.c_int, [_P, _c.c_int]),
    "parity_py_output_new": (_P, [_P, _c.c_int, _S]),
    "parity_py_output_wrap": (_P, [_P, _c.c_int, _S, _P]),
    "parity_py_output_unwrap": (None, [_P]),
    "parity_py_output_fill_reference": (None, [_P, _c.c_int, _P]),
    "parity_py_tensor_data": (_P, [_P]),
    "parity_py_case_reference": (_c.c_int, [_P, _c.c_int, _P, _c.c_int64]),
    "parity_py_tensor_guards_ok": (_c.c_int, [_P]),
    "parity_py_tensor_free": (None, [_P]),
    "parity_py_check_new": (_P, [_S, _c.c_int, _S, _S, _c.c_uint64, _c.c_int]),
    "parity_py_check_free": (None, [_P]),
    "parity_py_check_judge": (_c.c_int, [_P, _c.c_int, _P, _c.POINTER(_P), _c.c_int, _c.c_double]),
    "parity_py_check_set": (_c.c_int, [_P, _c.c_int, _S, _c.c_int, _c.c_int, _S, _c.c_double]),
    "parity_py_check_wl_verdict": (_c.c_int, [_P, _c.c_int]),
    "parity_py_check_wl_q": (_c.c_double, [_P, _c.c_int]),
    "parity_py_baseline_count": (_c.c_int, []),
    "parity_py_baseline_name": (_S, [_c.c_int]),
    "parity_py_check_baseline": (_c.c_int, [_P, _c.c_int, _P, _c.POINTER(_P)]),
    "parity_py_check_baseline_set": (_c.c_int, [_P, _c.c_int, _c.c_int]),
    "parity_py_check_baseline_caught": (_c.c_int, [_P, _c.c_int]),
    "parity_py_check_finish": (_c.c_int, [_P]),
    "parity_py_check_worst_workload": (_S, [_P]),
    "parity_py_verdict_name": (_S, [_c.c_int]),
    "parity_py_dtype_name": (_S, [_c.c_int]),
    "parity_py_role_name": (_S, [_c.c_int]),
    "parity_py_check_text": (_P, [_P, _S]),
    "parity_py_check_json": (_P, [_P, _S]),
    "parity_py_round": (_c.c_int, [_S, _c.c_int, _c.c_uint64, _c.c_int, _P, _c.c_size_t, _P, _P,
                                   _c.c_char_p, _c.c_size_t]),
    "parity_py_lp_compare": (_c.c_int, [_P, _c.c_size_t, _S, _P, _c.c_size_t, _S, _P, _c.c_size_t, _S,
                                        _S, _S, _S, _c.POINTER(_P), _c.c_char_p, _c.c_size_t]),
    "parity_py_run_builtin": (_c.c_int, [_S, _S, _c.c_int, _P, _P, _P, _P, _c.c_int, _P, _P, _P,
                                         _c.c_int, _P, _P, _c.c_int]),
    "parity_py_builtin_dtype": (_S, [_S, _S, _c.c_int]),
    "parity_py_workload_values": (_c.c_int, [_c.c_int, _c.c_double, _c.c_int, _c.c_double, _c.c_uint64,
                                             _c.c_uint64, _c.c_int64, _c.c_int64, _P, _c.c_double,
                                             _c.c_int64, _P, _c.c_char_p, _c.c_size_t]),
    "parity_py_version": (_S, []),
}
# Exports added after a bridge may have been built (a stale build tree): declared when present,
# and the functions that need them say to rebuild (the rest of the package keeps working).
_OPTIONAL = {"parity_py_workload_values", "parity_py_version"}
for _n, (_res, _args) in _SIGS.items():
    if _n in _OPTIONAL and not hasattr(lib, _n):
        continue
    _f = getattr(lib, _n)
    _f.restype = _res
    _f.argtypes = _args

def _enum(name_of: Any) -> List[str]:
    """A C enum's names in enum order, as many as it has: its name function answers "?" past the
    last one, so a value added in C needs no change here (never a literal range)."""
    return list(itertools.takewhile(lambda s: s != "?", (name_of(i).decode() for i in itertools.count())))


# The verdicts (src/verify/verify.c), the element types (kernel_abi.h parity_dtype_t) and the
# roles of declared ops' inputs (op_abi.h parity_role_t), by their C codes.
VERDICTS: List[str] = _enum(lib.parity_py_verdict_name)
DTYPE_CODE: Dict[str, int] = {n: i for i, n in enumerate(_enum(lib.parity_py_dtype_name))}
ROLES: List[str] = _enum(lib.parity_py_role_name)


def b(s: Union[str, bytes, None]) -> Optional[bytes]:
    return s.encode() if isinstance(s, str) else s


def take_str(ptr: Optional[int]) -> Optional[str]:
    """A malloc'd C string as str, freed."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.parity_py_free(ptr)


def take_json(ptr: Optional[int]) -> Any:
    s = take_str(ptr)
    return None if s is None else json.loads(s)


def errbuf() -> "ctypes.Array[ctypes.c_char]":
    return ctypes.create_string_buffer(1024)


def version() -> str:
    """The library's version: CMake's project(VERSION), compiled into the bridge (the wheel's
    metadata reads the same line: pyproject.toml's [tool.scikit-build.metadata.version])."""
    if not hasattr(lib, "parity_py_version"):  # a bridge built before the export
        return "0+unknown"
    v = lib.parity_py_version()
    return v.decode() if isinstance(v, bytes) else "0+unknown"


# User code (a candidate function, a declared op's reference) runs under this lock: parity.check
# builds the next workload's case in a background thread while the current one runs (_check.py
# _Ahead), and the lock keeps a reference called back from that build from running beside the
# candidate (a reference may set process-wide state, such as the oracle's default dtype, or share
# a library's buffers with the candidate). Only parity's own C work overlaps user code.
USER_CODE = threading.RLock()
