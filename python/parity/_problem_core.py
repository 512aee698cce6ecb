"""parity.problems: the Problem a benchmark's files become (issue #37; docs/problems.md): its
inputs, roles, sizes and reference as a parity.Op judged under a contract."""
from __future__ import annotations

import copy
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ._custom import Input, Op
from ._declared import building_dtype
from ._errors import ProblemError
from ._lib import USER_CODE
from ._problem_oracle import CONTRACTS, _FLOAT_NAMES, _outputs_list, _Run, _tdtype, _to_numpy, _torch

# -- the problem -------------------------------------------------------------------------------------

def _axes_terms(axes: List[str], shapes: Dict[str, Any]) -> int:
    """Terms a reduction over these axes sums at the problem's base sizes (0 for none)."""
    if not axes:
        return 0
    n = 1
    for a in axes:
        v = shapes.get(a)
        n *= int(v[0] if isinstance(v, (list, tuple)) else v) if v is not None else 1
    return n

class Problem:
    """A benchmark problem read by load(): name, format ("sol", "flashinfer", "kernelbench"), path,
    contract, op (the parity.Op judged under that contract), roles {input: (role, vocab or None)},
    dtype (parity's input dtype), rule (the benchmark's own correctness rule), notes."""

    def __init__(self) -> None:
        self.name = ""
        self.format = ""
        self.path = ""
        self.contract = "reference"
        self.inputs: Dict[str, Dict[str, Any]] = {}   # name -> {dtype, shape (axes) or None (scalar)}
        self.outputs: Dict[str, Dict[str, Any]] = {}
        self.order: List[str] = []                     # call order of the reference (inputs, scalars)
        self.scalars: Dict[str, Any] = {}              # scalar inputs -> value (parity attrs)
        self.roles: Dict[str, Tuple[str, Optional[str]]] = {}
        self.role_why: Dict[str, str] = {}
        # integer inputs only the problem's own workload lines give (offsets, page tables): role
        # "structure"; parity's workloads then take them from a line (structure_workloads)
        self.structure: List[str] = []
        self.shapes: Dict[str, List[int]] = {}
        self.fixed: List[str] = []
        self.dtype = "f32"
        self.rule: Dict[str, Any] = {}
        self.notes: List[str] = []
        self.reference: Optional[_Run] = None
        # the declared op: the float outputs only (None when every output is an integer: argmax)
        self.op: Optional[Op] = None
        # the op parity draws a workload's inputs from: self.op, or for a problem with no float
        # output one whose outputs are the integer ones as floats (never checked, only drawn)
        self.draw_op: Optional[Op] = None
        self._kb: Dict[str, Any] = {}
        # the reference contract's evaluations are native runs: their inputs (cloned) and the
        # reference's outputs as it returned them, so that the benchmark's rule, which needs the
        # native reference on the judged inputs, finds them instead of running it again
        self._native_seen: List[Tuple[Dict[str, Any], List[Any]]] = []
        self._mixed: Optional[Dict[str, List[str]]] = None  # _mixed_axes(), once
        self.load_args: Dict[str, Any] = {}  # load()'s arguments: a child process loads the same problem

    @property
    def int_outputs(self) -> List[str]:
        """Outputs of an integer (or bool) dtype: indices, top-k ids. They are judged exactly
        (_problem_ints), apart from the float outputs the declared op judges against a tolerance."""
        return [o for o, s in self.outputs.items() if s["dtype"] not in _FLOAT_NAMES]

    @property
    def float_outputs(self) -> List[str]:
        return [o for o, s in self.outputs.items() if s["dtype"] in _FLOAT_NAMES]

    # the reference as parity.Op calls it: numpy arrays in (float64: the oracle; float32: the
    # contract evaluation), numpy arrays out in the same dtype; only the outputs named in `keep`
    # (default: the float ones, the declared op's)
    def _oracle(self, contract: str, keep: Optional[List[str]] = None) -> Callable[..., Any]:
        idx = [i for i, o in enumerate(self.outputs) if o in (self.float_outputs if keep is None else keep)]

        def reference(**kw: Any) -> Any:
            fl = [np.asarray(kw[k]).dtype for k in self.inputs if k in kw and self._is_float(k)]
            f64 = bool(fl) and fl[0] == np.float64
            mode = "f64" if f64 else ("f32" if contract == "math" else "native-unrounded")
            args = self._torch_args(kw, mode, held=building_dtype())
            for k, t in args.items():  # the C engine's buffers come uncopied (_parity_borrows_inputs)
                src = kw.get(k)
                if isinstance(src, np.ndarray) and hasattr(t, "data_ptr") and src.size and \
                        t.data_ptr() == src.__array_interface__["data"][0]:
                    args[k] = t.clone()  # a reference editing its inputs in place edits its own copy
            try:
                with USER_CODE:  # the run and what it left in self.reference, together
                    outs = self._run_reference(mode, args)
                    rounded = self.reference.rounded if self.reference is not None else None
                if mode == "native-unrounded" and self.reference is not None:
                    self._remember_native(args, rounded)
            except ProblemError:
                raise
            except Exception as e:  # name what failed: an op with no fp64 path, a reference bug
                what = {"f64": "with every float promoted to float64 (the oracle)",
                        "f32": "with every float promoted to float32 (the math contract's evaluation)"}.get(
                            mode, "in its own dtypes (the reference contract's evaluation)")
                hint = ""
                m = re.search(r"\"(\w+)\" not implemented for '(\w+)'", str(e))
                if m:
                    hint = ": torch has no %s path for %s on this device" % (m.group(2), m.group(1))
                raise ProblemError("%s: the reference raises when run %s%s (%s: %s)" % (
                    self.path, what, hint, type(e).__name__, e)) from e
            want = np.float64 if f64 else np.float32
            return tuple(_to_numpy(outs[i], want) for i in idx)
        reference.__name__ = "%s_reference_%s" % (self.name, contract)
        # _declared.py: the C engine's input buffers may be passed without a copy, since the
        # tensors made of them above are new ones (a dtype conversion, else the clone)
        reference._parity_borrows_inputs = True  # type: ignore[attr-defined]
        # ... and it holds the user-code lock only while the problem's own code runs
        # (_run_reference), not while parity converts its inputs and outputs
        reference._parity_locks_itself = True  # type: ignore[attr-defined]
        return reference

    def _is_float(self, k: str) -> bool:
        return self.inputs[k]["dtype"] in _FLOAT_NAMES

    def _torch_args(self, kw: Dict[str, Any], mode: str, held: Optional[str] = None) -> Dict[str, Any]:
        """parity's arrays or tensors -> torch tensors in the problem's declared dtypes (values
        rounded to the declared dtype: the kernel gets exactly these), then promoted for the
        oracle modes. held: a parity dtype every float value is known to be exact in (the C
        engine's inputs are exact in the case's dtype); in the oracle modes an input whose
        declared dtype holds all of that dtype's values skips the rounding, which is then exact."""
        torch = _torch()
        out: Dict[str, Any] = {}
        for k, spec in self.inputs.items():
            if spec["shape"] is None:
                out[k] = kw.get(k, self.scalars.get(k))
                continue
            v = kw[k]
            t = v if isinstance(v, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(v))
            t = t.detach().cpu()
            promote = self._is_float(k) and mode in ("f64", "f32")
            if not (promote and held is not None and spec["dtype"] in _HOLDS.get(held, ())):
                t = t.to(_tdtype(spec["dtype"]))
            if promote:
                t = t.to(torch.float64 if mode == "f64" else torch.float32)
            out[k] = t
        return out

    def _run_reference(self, mode: str, args: Dict[str, Any]) -> List[Any]:
        """The problem's reference (user code: under the user-code lock, _lib.py) in `mode`."""
        assert self.reference is not None
        with USER_CODE:
            if self.format == "kernelbench":
                model = self._kb["models"][mode]
                res = self.reference(mode, model, *[args[k] for k in self.order])
            else:
                res = self.reference(mode, *[args[k] for k in self.order])
        return _outputs_list(res, list(self.outputs), self.path)

    _NATIVE_KEPT = 16  # native runs remembered (a judgement's workloads: parity's and the problem's own)

    def _remember_native(self, args: Dict[str, Any], res: Any) -> None:
        torch = _torch()
        outs = _outputs_list(res, list(self.outputs), self.path)

        def keep(v: Any) -> Any:
            return v.detach().clone() if isinstance(v, torch.Tensor) else v
        self._native_seen.append(({k: keep(v) for k, v in args.items()}, [keep(o) for o in outs]))
        del self._native_seen[:-self._NATIVE_KEPT]

    def native(self, kw: Dict[str, Any]) -> List[Any]:
        """The reference in its own dtypes on the inputs a kernel gets (torch tensors): a native
        run the reference contract's evaluation made on exactly these inputs, else run now."""
        args = self._torch_args(kw, "native")
        for seen, outs in reversed(list(self._native_seen)):  # a copy: a case build may append meanwhile
            if _same_args(seen, args):
                return list(outs)
        return self._run_reference("native", args)  # under the user-code lock

    def _build_op(self, contract: str, draw: bool = False) -> Optional[Op]:
        """The declared op of the float outputs (None when there is none). draw: for a problem
        without a float output, an op whose outputs are the integer ones (the reference's values
        as floats): parity.inputs draws the workloads' inputs from it; it is never checked."""
        if contract not in CONTRACTS:
            raise ValueError("contract %r: expected math or reference" % (contract,))
        # a structure input is declared as ids over its own first axis: its values always come
        # given (structure_workloads), never drawn, so the bound is never used
        ins = {k: Input(tuple(self.inputs[k]["shape"]), role="token_ids", vocab=self.inputs[k]["shape"][0])
               if r == "structure" else Input(tuple(self.inputs[k]["shape"]), role=r, **({"vocab": v} if v else {}))
               for k, (r, v) in self.roles.items()}
        keep = self.int_outputs if draw else self.float_outputs
        if not keep:
            return None
        outs = {o: tuple(self.outputs[o]["shape"] or ()) for o in keep}
        red: Dict[str, List[str]] = {}
        for o, shp in outs.items():  # axes an input carries and the output does not: summed into it
            # The input whose such axes hold the most terms, not their union over the inputs: a
            # KernelBench problem names every input's axes apart (predictions_0, targets_0), and
            # an MSE's k is the 128 x 4096 terms of one operand, not 128 x 4096 of both multiplied.
            best: List[str] = []
            for k in ins:
                if not self._is_float(k):
                    continue
                ds = sorted(set(ins[k].shape) - set(shp))
                if ds and _axes_terms(ds, self.shapes) > _axes_terms(best, self.shapes):
                    best = ds
            if not best:  # a reduction inside (softmax's row sum, a norm's mean square): probed
                best = self._mixed_axes().get(o, [])
            if best:
                red[o] = best
        import parity
        name = self.name
        try:
            builtin = set(parity.ops())
        except Exception:  # pragma: no cover
            builtin = set()
        if name in builtin:  # a declared op may not take a built-in op's name
            name = name + "_problem"
        return Op(name, inputs=ins, outputs=outs, reference=self._oracle(contract, keep), shapes=self.shapes,
                  attrs=dict(self.scalars), reductions=red or None, multilinear=False, fixed=self.fixed)

    def with_contract(self, contract: str) -> "Problem":
        p = copy.copy(self)
        p.contract = contract
        p.op = self._build_op(contract)
        p.draw_op = p.op if p.op is not None else self._build_op(contract, draw=True)
        return p

    def fails_at(self, sizes: Dict[str, int]) -> str:
        """The reference run once, natively, on N(0,1) float inputs (integers below their bound,
        else 0/1) at these axis sizes: "" when it runs, else its error ("Type: message"). How
        parity learns that a reference needs sizes it cannot read from the definition (smaller
        var axes, parity's odd sizes)."""
        try:
            self._run_reference("native", self._probe_args(sizes))
        except Exception as e:  # the reference's own failure at these sizes
            return "%s: %s" % (type(e).__name__, e)
        return ""

    def _probe_args(self, sizes: Dict[str, int], f64: bool = False) -> Dict[str, Any]:
        """N(0,1) float inputs (rounded to their dtype; promoted to float64 when f64), integers
        below their bound (else 0/1), at these axis sizes: the inputs of parity's probes."""
        torch = _torch()
        gen = torch.Generator().manual_seed(0)
        args: Dict[str, Any] = {}
        for k, spec in self.inputs.items():
            if spec["shape"] is None:
                args[k] = self.scalars.get(k)
                continue
            shape = [int(sizes[a]) for a in spec["shape"]]
            if self._is_float(k):
                t = torch.randn(shape, generator=gen).to(_tdtype(spec["dtype"]))
                args[k] = t.to(torch.float64) if f64 else t
            else:
                vocab = self.roles.get(k, ("", None))[1]
                hi = int(sizes.get(vocab, 2)) if vocab else 2
                args[k] = torch.randint(0, max(hi, 1), shape, generator=gen).to(_tdtype(spec["dtype"]))
        return args

    # The probe's size bound, in input and output elements: it holds about six fp64 copies of
    # them at once (the inputs, a perturbed input, three runs' outputs, their comparison), 2^24
    # elements is then 768 MiB, under the memory guard's share of this machine; only const axes
    # reach it (var axes are cut to _MIXED_VAR), and a problem that large is left without it.
    _MIXED_MAX_ELEMS = 1 << 24
    _MIXED_VAR = 8  # a var axis's size in the probe (the base rule's least rows)

    def _mixed_axes(self) -> Dict[str, List[str]]:
        """{output: the axes it shares with an input along which one input element reaches many
        output elements}: a reduction inside the op that no axis names (softmax's row sum, a
        norm's mean square, attention's sum over keys when the names coincide). Found by
        perturbing the middle element of each float input in the fp64 oracle (var axes at most 8)
        and seeing which output elements move; for each output, the input whose mixed axes hold
        the most terms. Once per problem (copies share it); {} when the reference does not run
        there, is not deterministic, or the probe is too large (docs/problems.md, "Reductions")."""
        if self._mixed is not None:
            return self._mixed
        self._mixed = {}
        torch = _torch()
        sizes = {a: int(v[0] if isinstance(v, (list, tuple)) else v) for a, v in self.shapes.items()}
        # var axes at most 8 (what mixes does not depend on their size; the probe stays cheap
        # beside the judgement), at the base sizes where the reference needs those
        small = {a: n if a in self.fixed else min(n, self._MIXED_VAR) for a, n in sizes.items()}
        try:
            elems = sum(int(np.prod([small[a] for a in sp["shape"]])) for sp in
                        list(self.inputs.values()) + list(self.outputs.values()) if sp["shape"])
            if elems > self._MIXED_MAX_ELEMS:
                return self._mixed
            with torch.no_grad():
                try:
                    args = self._probe_args(small, f64=True)
                    base = self._run_reference("f64", args)
                except Exception:
                    args = self._probe_args(sizes, f64=True)
                    base = self._run_reference("f64", args)
                if not all(torch.equal(a, b) for a, b in zip(base, self._run_reference("f64", args))
                           if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                    return self._mixed  # not deterministic: no reading of what moved
                found: Dict[str, Tuple[int, List[str]]] = {}
                for k, spec in self.inputs.items():
                    if not spec["shape"] or not self._is_float(k):
                        continue
                    x = args[k]
                    mid = tuple(n // 2 for n in x.shape)
                    pert = dict(args)
                    pert[k] = x.clone()
                    # 2^-10 of the element (and 2^-10 absolute for one near 0): far above fp64's
                    # rounding (2^-52), so every output it reaches moves; small enough that a max,
                    # a clamp or a ReLU at another element does not switch branch over it
                    pert[k][mid] += (abs(float(x[mid])) + 1.0) * 2.0 ** -10
                    moved = self._run_reference("f64", pert)
                    for o, before, after in zip(self.outputs, base, moved):
                        oshape = self.outputs[o]["shape"] or []
                        if o not in self.float_outputs or not isinstance(before, torch.Tensor):
                            continue
                        where = (before != after).nonzero()
                        axes = [a for i, a in enumerate(oshape) if a in spec["shape"] and where.shape[0] > 1
                                and int(where[:, i].unique().numel()) > 1]
                        terms = _axes_terms(axes, self.shapes)
                        if axes and terms > found.get(o, (0, []))[0]:
                            found[o] = (terms, axes)
        except Exception:  # the reference does not run on these probes: nothing inferred
            return self._mixed
        self._mixed = {o: axes for o, (_, axes) in found.items()}
        for o, axes in self._mixed.items():
            self.notes.append("output %s mixes axis %s of its input (a reduction inside the op, %d terms, found by "
                              "perturbing one input element): the floor admits a sequential fp32 sum over it"
                              % (o, ", ".join(axes), _axes_terms(axes, self.shapes)))
        return self._mixed

    def with_scalars(self, scalars: Dict[str, Any]) -> "Problem":
        """The same problem with other scalar values (an op of its own: a declared op has one set
        of attributes); the lines of the problem's own workloads that give them are its own."""
        p = copy.copy(self)
        p.scalars = dict(scalars)
        p.notes = list(self.notes)
        p._native_seen = []
        p.op = p._build_op(self.contract)
        p.draw_op = p.op if p.op is not None else p._build_op(self.contract, draw=True)
        return p

    def describe(self) -> str:
        lines = ["problem %s (%s: %s)" % (self.name, self.format, self.path),
                 "  contract: %s" % self.contract]
        for k, spec in self.inputs.items():
            if spec["shape"] is None:
                lines.append("  input %-18s scalar = %r" % (k, self.scalars.get(k)))
                continue
            role, vocab = self.roles[k]
            lines.append("  input %-18s %-9s [%s]  role %s%s  (%s)" % (
                k, spec["dtype"], ", ".join(spec["shape"]), role, " over %s" % vocab if vocab else "",
                self.role_why.get(k, "")))
        for o, spec in self.outputs.items():
            lines.append("  output %-17s %-9s [%s]%s" % (o, spec["dtype"], ", ".join(spec["shape"] or []),
                                                         "  judged exactly (integer)" if o in self.int_outputs else ""))
        lines.append("  sizes: %s" % ", ".join("%s=%s" % (d, "/".join(str(x) for x in s))
                                               for d, s in self.shapes.items()))
        for n in self.notes:
            lines.append("  note: %s" % n)
        return "\n".join(lines)


# torch dtypes that hold every value of a parity dtype exactly (bf16 and fp16 in fp32 and fp64)
_HOLDS = {"bf16": ("bfloat16", "float32", "float64"), "f16": ("float16", "float32", "float64"),
          "f32": ("float32", "float64")}


def _same_args(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """The same inputs, bit for bit (tensors: dtype, shape and values; scalars: equal)."""
    torch = _torch()
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        w = b[k]
        if isinstance(v, torch.Tensor) or isinstance(w, torch.Tensor):
            if not (isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor) and v.dtype == w.dtype
                    and v.shape == w.shape and torch.equal(v, w)):
                return False
        elif v != w:
            return False
    return True
