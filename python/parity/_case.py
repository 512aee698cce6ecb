"""Ops and their cases: what an op takes and returns, and the inputs of one (op, workload, seed,
dtype) with the fp64 reference behind them (held by the C library, never copied out)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._lib import b, errbuf, lib, take_json

if TYPE_CHECKING:
    from ._custom import Op


def ops() -> List[str]:
    """The names of every op parity judges (`parity ops`)."""
    return [lib.parity_py_op_name(i).decode() for i in range(lib.parity_py_op_count())]


@functools.lru_cache(maxsize=None)
def _op_static(op: str) -> Dict[str, Any]:
    d = take_json(lib.parity_py_op_json(b(op)))
    if d is None:
        raise ValueError("no op %r (parity.ops() lists them: %s)" % (op, ", ".join(ops())))
    r: Dict[str, Any] = d
    return r


def op_info(op: str) -> Dict[str, Any]:
    """An op's inputs, outputs, attributes and workloads, as a dict:
    name, summary, error_model, faithful_accumulator, inputs [{name, float, dtype, shape}],
    outputs [{name, shape}], attrs {name: value}, dims {N, D, V} and workloads
    [{name, summary, N, D, V, production}]. Shapes, dtypes and attributes are those of the first
    workload (its inputs are built once to learn them)."""
    d = dict(_op_static(op))
    first = next((w["name"] for w in d["workloads"] if not w["production"]), d["workloads"][0]["name"])
    info = Case(op, first, 1, "f32").info
    fl = {x["name"]: x["float"] for x in d["inputs"]}
    d["inputs"] = [dict(x, float=fl[x["name"]]) for x in info["inputs"]]
    for x in d["inputs"]:
        x.pop("nbytes", None)
        if x["float"]:
            x["dtype"] = "float"  # whichever dtype= parity.inputs / parity.check is given
    d["outputs"] = info["outputs"]
    d["attrs"] = info["attrs"]
    d["example_workload"] = first
    return d


def workload_names(op: str, which: Union[None, str, Sequence[str]]) -> List[str]:
    """None: every preset; "quick": the presets that are not production-sized; a str: that one
    workload ("text" or "text@NxD[xV]"); a list: those."""
    ws = _op_static(op)["workloads"]
    if which is None:
        return [w["name"] for w in ws]
    if which == "quick":
        return [w["name"] for w in ws if not w["production"]]
    if isinstance(which, str):
        return [which]
    names = list(which)
    if not names:
        raise ValueError("workloads=[]: name at least one (parity.op_info(%r)['workloads'])" % op)
    return names


@functools.lru_cache(maxsize=None)
def _needed_letters(op: str) -> Optional[FrozenSet[str]]:
    """The shape letters (N, D, V) that no input's shape carries, found on a preset whose three
    sizes differ (in the uniform preset V == N, so the values alone cannot tell). None when no
    preset has three distinct sizes."""
    for w in _op_static(op)["workloads"]:
        if w["production"] or len({w["N"], w["D"], w["V"]}) < 3:
            continue
        err = errbuf()
        h = lib.parity_py_case_new(b(op), b(w["name"]), 1, b"f32", err, len(err))
        if not h:
            continue
        try:
            info = take_json(lib.parity_py_case_json(h))
        finally:
            lib.parity_py_case_free(h)
        have = set(n for x in info["inputs"] for n in x["shape"])
        return frozenset(k for k in ("N", "D", "V") if w[k] not in have)
    return None


class _CaseHandle:
    """Owns one C case: freed when the Case and every view of its inputs are gone. It keeps the
    declared op the case belongs to (decl) alive as long: freeing the case reads its op."""
    __slots__ = ("h", "decl", "__weakref__")

    def __init__(self, h: Any, decl: Any = None) -> None:
        self.h, self.decl = h, decl

    def __del__(self) -> None:
        h, self.h = self.h, None
        if h:
            lib.parity_py_case_free(h)


class Case:
    """One built case (C-owned inputs and reference). Freed when the last view of its inputs goes."""

    def __init__(self, op: str, workload: Any, seed: int, dtype: Any) -> None:
        from . import _declared
        err = errbuf()
        self.op = op
        self.given: Optional[Dict[str, Any]] = None
        # A declared op's key (python/parity/_declared.py): the case keeps its declaration alive
        # (the C op and the reference callback), takes the attributes as the user gave them and
        # passes no shape letters (a declared op's dimensions are all in its inputs' shapes).
        self.decl = _declared.lookup(op)
        if isinstance(workload, dict):  # a declared op's given inputs (_declared.given_of's dict)
            if self.decl is None:
                raise ValueError("workload: given inputs are for declared ops (parity.Op) only")
            self.decl.given(workload)
            self.given, workload, dtype = workload, workload["name"], workload["dtype"]
        self.dtype = _arrays.canon_dtype(dtype)
        # The C case belongs to a handle of its own, which the input views keep alive: the views
        # referring to the Case itself made a reference cycle, so every case's buffers (tens of
        # MB at production shapes) waited for Python's cyclic collector, and a judgement's heap
        # grew by each check's cases (fresh pages the kernel zeroes: ~20% of a problem's time).
        with _declared.building(self.dtype):
            self._hd = _CaseHandle(lib.parity_py_case_new(b(op), b(workload), int(seed), b(self.dtype), err,
                                                          len(err)), self.decl)
        if self.given is not None and self.decl is not None:
            self.decl.given_clear()  # built: a preset of the same name is the preset again
        if not self.h:
            if self.decl is not None:
                raise self.decl.failure(err.value.decode())
            raise ValueError(err.value.decode())
        self.info = take_json(lib.parity_py_case_json(self.h))
        self.seed = int(self.info["seed"])  # a baseline's input scheme has its own seed
        self.workload = self.info["workload"]
        self.production = self.info["production"]
        self.input_names: List[str] = [x["name"] for x in self.info["inputs"]]
        self.output_names: List[str] = [x["name"] for x in self.info["outputs"]]
        self.output_shapes: List[Tuple[int, ...]] = [tuple(x["shape"]) for x in self.info["outputs"]]
        self.attrs: Dict[str, Any] = dict(self.decl.attrs if self.decl is not None else self.info["attrs"])
        self.extra_dims = {} if self.decl is not None else self._extra_dims()
        self._arrays: Optional[Dict[str, Any]] = None

    @property
    def h(self) -> Any:
        """The C case (parity_py_case_new's handle), None once freed."""
        hd = getattr(self, "_hd", None)
        return hd.h if hd is not None else None

    def _extra_dims(self) -> Dict[str, Tuple[int, bool]]:
        """Output dimensions by the workload's letter for them (V of embedding_rmsnorm_bwd's dE):
        a function is passed those it names as parameters, and (through **kwargs) those the
        inputs' shapes cannot tell it ("needed"). Returns {letter: (size, needed)}."""
        outs = set(n for shape in self.output_shapes for n in shape)
        dims = self.info["dims"]
        needed: Optional[Any] = _needed_letters(self.op)
        if needed is None:  # no preset tells the letters apart: judge by this case's values
            have = set(n for x in self.info["inputs"] for n in x["shape"])
            needed = {k for k in ("N", "D", "V") if dims[k] not in have}
        return {k: (dims[k], k in needed) for k in ("N", "D", "V") if dims[k] in outs}

    def arrays(self) -> Dict[str, Any]:
        """The inputs as numpy arrays over the C buffers (no copy): bf16 as uint16 bits."""
        if self._arrays is None:
            out = {}
            for i, x in enumerate(self.info["inputs"]):
                addr = lib.parity_py_case_input(self.h, i)
                out[x["name"]] = _arrays.view_of(addr, x["nbytes"], x["dtype"], tuple(x["shape"]), self._hd)
            self._arrays = out
        return self._arrays

    def input_dtype(self, name: str) -> str:
        return str(next(x["dtype"] for x in self.info["inputs"] if x["name"] == name))

    def framework_inputs(self, like: str, device: Any) -> Dict[str, Any]:
        return {k: _arrays.to_framework(a, self.input_dtype(k), like, device) for k, a in self.arrays().items()}

    def hashes(self) -> List[int]:
        return [lib.parity_py_case_input_hash(self.h, i) for i in range(len(self.input_names))]


def display_name(op: str) -> str:
    """An op's name as a report prints it (a declared op's key without its "#declN")."""
    return op.split("#decl", 1)[0]


def worker_spec(case: "Case") -> Any:
    """What the isolated worker (python/parity/_worker.py) needs to build the same case: a
    built-in op's name; for a declared op its declaration, attributes and the fp64 reference of
    this case (the worker cannot call the user's reference: it rarely pickles), from which the
    worker declares a stand-in op with the same workloads (python/parity/_declared.py standin)."""
    if case.decl is None:
        return case.op
    refs = []
    for i, shape in enumerate(case.output_shapes):
        a = np.empty(shape, dtype=np.float64)
        if lib.parity_py_case_reference(case.h, i, a.ctypes.data, a.size) != 0:
            raise RuntimeError("parity: cannot read the reference of output %s" % case.output_names[i])
        refs.append(a)
    return {"decl": case.decl.spec, "attrs": case.decl.attrs, "refs": refs, "given": case.given}


def case_from_spec(spec: Any, workload: str, seed: int, dtype: Any) -> "Case":
    """The worker's side of worker_spec."""
    if isinstance(spec, str):
        return Case(spec, workload, seed, dtype)
    from . import _declared
    d = _declared.standin(spec["decl"], spec["attrs"], spec["refs"])
    return Case(d.key, spec["given"] or workload, seed, dtype)


class Inputs(Dict[str, Any]):
    """parity.inputs(...): the op's inputs by name plus its attributes (so fn(**inputs) works),
    with .attrs, .dims (output dimensions the inputs leave open, e.g. {"V": 50257}), .workload,
    .seed, .dtype and .op (the op's name). Keep it alive while judging with parity.compare: it
    holds the case."""

    def __init__(self, case: Any, tensors: Mapping[str, Any], *, op: str, input_names: Sequence[str],
                 attrs: Mapping[str, Any], workload: str, seed: int, dtype: str, dims: Mapping[str, int],
                 output_shapes: Mapping[str, Tuple[int, ...]]) -> None:
        super().__init__(tensors)
        self.update(attrs)
        self._case = case
        self._input_names = list(input_names)
        self.op = op
        self.workload = workload
        self.seed = seed
        self.dtype = dtype
        self.attrs: Dict[str, Any] = dict(attrs)
        self.dims: Dict[str, int] = {k: v for k, v in dims.items() if k not in self}
        self.output_names: List[str] = list(output_shapes)
        self.output_shapes: Dict[str, Tuple[int, ...]] = dict(output_shapes)

    @property
    def tensors(self) -> Dict[str, Any]:
        """The inputs only (no attributes)."""
        return {k: self[k] for k in self._input_names}


def _resolve(op: Union[str, "Op"]) -> Tuple[str, Any]:
    """(the name the C library knows op by, its declaration or None): a built-in op's name is
    itself; a parity.Op is declared to the C library (python/parity/_declared.py) and known by
    its key. Here, below parity.check (_check.py) and parity.inputs that both resolve ops, so
    neither module imports the other for it."""
    if isinstance(op, str):
        return op, None
    from . import _custom, _declared
    if not isinstance(op, _custom.Op):
        raise TypeError("op: expected an op name (parity.ops()) or a parity.Op, got %r" % (op,))
    d = _declared.decl_of(op)
    return d.key, d


def inputs(op: Union[str, "Op"], workload: str, *, seed: int = 1, dtype: Any = "bf16", like: str = "numpy",
           device: Any = "cpu") -> Inputs:
    """The inputs of `op` for `workload` (a preset name or "NAME@NxD[xV]"), exactly those
    `parity check` and `parity gen` produce for the same seed and dtype. like="numpy" gives
    numpy arrays over parity's own buffers (bf16 as uint16 bit patterns); like="torch" torch
    tensors sharing that memory on the CPU, or copies on `device`. op: a built-in op's name or a
    declared parity.Op (its workloads: parity.Op.workloads())."""
    key, decl = _resolve(op)  # a parity.Op: its registered key (python/parity/_declared.py)
    name = key if decl is None else decl.op.name
    case = Case(key, workload, seed, dtype)
    return Inputs(case, case.framework_inputs(like, device), op=name, input_names=case.input_names,
                  attrs=case.attrs, workload=case.workload, seed=case.seed, dtype=case.dtype,
                  dims={k: v for k, (v, needed) in case.extra_dims.items() if needed},
                  output_shapes=dict(zip(case.output_names, case.output_shapes)))
