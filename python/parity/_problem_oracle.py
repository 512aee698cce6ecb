"""parity.problems, the base (issue #37; docs/problems.md): the errors, the dtype tables and the
fp64 oracle -- a PyTorch reference run with every floating dtype promoted (a torch function mode),
or natively with an output's own final narrowing cast undone (the reference contract)."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Set, Tuple

import numpy as np

from ._errors import ProblemError

CONTRACTS = ("math", "reference")

_FLOAT_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}
_INT_NAMES = {"int64", "int32", "int16", "int8", "uint8", "bool"}
_UNSUPPORTED_DTYPES = {"float8_e4m3fn", "float8_e5m2", "float4_e2m1", "float4_e2m1fn_x2"}
_PARITY_DTYPE = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f32"}
# Languages whose entry point is a Python function (SOL's python languages, FlashInfer's python/triton).
_PY_LANGS = {"python", "pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend", "tilelang"}
_CPU_LANGS = {"python", "pytorch"}


class ProblemFileError(ProblemError):
    """A problem or solution file parity cannot read: names the file and the field (exit 3)."""

    def __init__(self, path: str, field: str, message: str) -> None:
        self.path, self.field = path, field
        super().__init__("%s: %s: %s" % (path, field, message))


class RefusedReference(ProblemError):
    """A reference parity refuses to promote to fp64 (a view(dtype) bit trick, ...)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the CLI checks first
        raise ProblemError("parity.problems needs torch (the references are PyTorch): %s" % e) from e
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        torch.nn.functional.scaled_dot_product_attention = _sdpa_math  # torch < 2.0
    return torch


def _sdpa_math(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
    """torch.nn.functional.scaled_dot_product_attention where the torch here predates it (2.0):
    the math its documentation states -- softmax(q k^T * scale + bias) v, scale 1/sqrt(E) unless
    given, bias -inf above the diagonal with is_causal and where a bool mask is False, a float
    mask added; with enable_gqa, key and value heads repeated to the query's. Problems and
    solutions that call it run on it (docs/problems.md, "Older torch"). Dropout is random: refused."""
    import math
    torch = _torch()
    if dropout_p:
        raise NotImplementedError("scaled_dot_product_attention with dropout_p > 0 is random: not judged")
    L, S = query.size(-2), key.size(-2)
    f = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        bias = bias.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        bias = bias.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else bias + attn_mask
    if enable_gqa and key.dim() >= 3 and key.size(-3) != query.size(-3):
        key = key.repeat_interleave(query.size(-3) // key.size(-3), dim=-3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), dim=-3)
    w = torch.softmax(query @ key.transpose(-2, -1) * f + bias, dim=-1)
    return w @ value


# -- the fp64 oracle: every floating dtype promoted ------------------------------------------------
def _promote_mode(target: Any) -> Any:
    """A torch function mode under which every floating dtype named in a call (x.to(bf16),
    dtype=torch.float16, x.float(), x.half(), ...) becomes `target`; view(dtype) is refused."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode

    floating = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
    T = torch.Tensor
    casts = {T.float, T.half, T.double, T.bfloat16}
    views = {T.view, getattr(T, "view_as", None)}

    def swap(v: Any) -> Any:
        if isinstance(v, torch.dtype) and v in floating:
            return target
        if isinstance(v, str) and v in ("torch.BFloat16Tensor", "torch.HalfTensor", "torch.FloatTensor",
                                        "torch.DoubleTensor"):
            return target
        return v

    class Promote(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in views and (any(isinstance(a, torch.dtype) for a in args[1:]) or "dtype" in kwargs):
                raise RefusedReference("the reference reinterprets bits with view(dtype): a bit trick has no "
                                       "fp64 counterpart, so parity cannot make an oracle of it (write the "
                                       "reference with arithmetic, or judge the op declared by hand)")
            if func in casts:
                return args[0].to(target)
            if getattr(func, "__name__", "") == "type" and args and isinstance(args[0], torch.Tensor) and \
                    len(args) > 1:
                args = (args[0],) + tuple(swap(a) for a in args[1:])
                return func(*args, **kwargs)
            args = tuple(swap(a) for a in args)
            kwargs = {k: swap(v) for k, v in kwargs.items()}
            return func(*args, **kwargs)

    return Promote()


_NO_LOW = re.compile(r"not implemented for '(Half|BFloat16)'")
# torch ops that had no fp16/bf16 path on this CPU and ran in fp32 instead (call_low), by name
LOW_FALLBACK_USED: Set[str] = set()


def call_low(func: Any, args: Any, kwargs: Any) -> Any:
    """func(*args, **kwargs); where torch has no Half/BFloat16 kernel for it on this CPU (torch
    1.13 lacks fp16 GEMM, GELU, ... on the CPU), the op run on fp32 copies of its low-precision
    tensors and its fp32 results rounded back to that dtype -- what a GPU kernel with fp32
    internals and a low-precision output gives. Not for in-place or out= calls (re-raised)."""
    try:
        return func(*args, **kwargs)
    except RuntimeError as e:
        m = _NO_LOW.search(str(e))
        name = getattr(func, "__name__", str(func))
        if not m or name.endswith("_") or "out" in kwargs:
            raise
        torch = _torch()
        from torch.utils._pytree import tree_map
        low = torch.float16 if m.group(1) == "Half" else torch.bfloat16

        def up(x: Any) -> Any:
            return x.float() if isinstance(x, torch.Tensor) and x.dtype == low else x

        def down(x: Any) -> Any:
            return x.to(low) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
        res = func(*tree_map(up, list(args)), **tree_map(up, dict(kwargs)))
        LOW_FALLBACK_USED.add(name)
        return tree_map(down, res)


def low_fallback() -> Any:
    """A torch function mode that runs every call through call_low."""
    from torch.overrides import TorchFunctionMode

    class LowFallback(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return call_low(func, args, kwargs or {})
    return LowFallback()


def run_low(fn: Callable[[], Any]) -> Any:
    """fn(); if it fails on a torch op with no fp16/bf16 CPU kernel, fn() again under
    low_fallback. The mode costs a Python call per torch op, so it is only entered for code
    that needs it."""
    try:
        return fn()
    except RuntimeError as e:
        if not _NO_LOW.search(str(e)):
            raise
    with low_fallback():
        return fn()


def _track_casts() -> Any:
    """A torch function mode that runs everything as written and remembers, for every cast to a
    narrower floating dtype, the value before it; undo(result) replaces an output that is the
    result of such a cast by the value before it. parity's judge allows one rounding to the
    output's dtype itself, so the reference contract's floor must not count it a second time."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    T = torch.Tensor
    casts = {T.to, T.type, T.float, T.half, T.bfloat16, T.double}

    class Track(TorchFunctionMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.before: Dict[int, Tuple[Any, Any]] = {}

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            res = call_low(func, args, kwargs or {})
            if func in casts and args and isinstance(args[0], torch.Tensor) and isinstance(res, torch.Tensor) \
                    and res is not args[0] and res.is_floating_point() and args[0].is_floating_point() \
                    and res.element_size() < args[0].element_size():
                self.before[id(res)] = (res, args[0])
            return res

        def undo(self, res: Any) -> Any:
            def one(t: Any) -> Any:
                while isinstance(t, torch.Tensor) and id(t) in self.before and self.before[id(t)][0] is t:
                    t = self.before[id(t)][1]
                return t
            if isinstance(res, dict):
                return {k: one(v) for k, v in res.items()}
            if isinstance(res, (tuple, list)):
                return type(res)(one(v) for v in res)
            return one(res)

    return Track()


class _NoAutocast:
    """What torch.autocast becomes while the reference runs promoted: autocast lowers precision
    below the torch function level (its casts are not calls the promotion mode sees), so inside
    the oracle it does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_NoAutocast":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Any) -> Any:  # used as a decorator
        return fn


def _disable_autocast() -> List[Tuple[Any, str, Any]]:
    torch = _torch()
    saved: List[Tuple[Any, str, Any]] = []
    for mod, name in ((torch, "autocast"), (getattr(torch, "cpu", None), None), (getattr(torch, "cuda", None), None)):
        if mod is None:
            continue
        if name is not None:
            saved.append((mod, name, getattr(mod, name, None)))
            setattr(mod, name, _NoAutocast)
            continue
        amp = getattr(mod, "amp", None)
        if amp is not None and hasattr(amp, "autocast"):
            saved.append((amp, "autocast", amp.autocast))
            setattr(amp, "autocast", _NoAutocast)
    return saved


def _restore(saved: List[Tuple[Any, str, Any]]) -> None:
    for mod, name, v in reversed(saved):
        setattr(mod, name, v)


def grad_mode(grad: bool) -> Any:
    """torch.enable_grad() for code that may use autograd itself (a definition's reference or a
    solution computing a backward with .backward() or torch.autograd.grad: SOL-ExecBench runs them
    with autograd on), else torch.no_grad() (a KernelBench model, whose parameters require grad)."""
    torch = _torch()
    return torch.enable_grad() if grad else torch.no_grad()


def detached(res: Any) -> Any:
    """A result with every tensor detached (one, or a tuple, list or dict of them)."""
    torch = _torch()
    if isinstance(res, torch.Tensor):
        return res.detach()
    if isinstance(res, (tuple, list)):
        return type(res)(detached(x) for x in res)
    if isinstance(res, dict):
        return {k: detached(v) for k, v in res.items()}
    return res


class _Run:
    """Runs a PyTorch callable in one of three modes: 'f64' (every float promoted to float64),
    'f32' (every float promoted to float32) or 'native' (as written); grad: with autograd on
    (grad_mode), the results detached."""

    def __init__(self, fn: Callable[..., Any], grad: bool = False) -> None:
        self.fn = fn
        self.grad = grad
        self.rounded: Any = None  # the last 'native-unrounded' run's result as the reference returned it

    def __call__(self, mode: str, *args: Any, **kwargs: Any) -> Any:
        torch = _torch()
        if mode == "native":
            with grad_mode(self.grad):
                return detached(run_low(lambda: self.fn(*args, **kwargs)))
        if mode == "native-unrounded":  # native, but an output's own final cast to a narrower dtype undone
            mode_ = _track_casts()
            with grad_mode(self.grad), mode_:
                res = self.fn(*args, **kwargs)
            self.rounded = detached(res)
            return detached(mode_.undo(res))  # undo first: it knows the cast results by identity
        target = torch.float64 if mode == "f64" else torch.float32
        old = torch.get_default_dtype()
        torch.set_default_dtype(target)
        saved = _disable_autocast()
        try:
            with grad_mode(self.grad), _promote_mode(target):
                return detached(self.fn(*args, **kwargs))
        finally:
            torch.set_default_dtype(old)
            _restore(saved)


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed blocks up to 32 MiB in the process's heap instead of
    returning each to the kernel (mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD). A
    judgement allocates and frees the same multi-megabyte arrays (inputs, the fp64 oracle's
    tensors, outputs) dozens of times per workload; returned to the kernel, each comes back as
    fresh pages the kernel must zero, which perf showed as ~17% of a judgement's samples (page
    faults, clear_page). The process's resident size stays at its peak instead. `parity problem`
    calls it; the library does not (it would change a user's process). False where there is no
    glibc mallopt."""
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    m_trim, m_top_pad, m_mmap = -1, -2, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap, 32 << 20) and mallopt(m_trim, (1 << 31) - 1) and mallopt(m_top_pad, 64 << 20))


def _tdtype(name: str) -> Any:
    torch = _torch()
    return getattr(torch, "bool" if name == "bool" else name)


def _to_numpy(t: Any, want: Any) -> Any:
    torch = _torch()
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.is_floating_point():
            t = t.to(torch.float64 if want == np.float64 else torch.float32)
        return t.numpy().astype(want, copy=False)
    return np.asarray(t, dtype=want)


def _outputs_list(res: Any, names: List[str], path: str) -> List[Any]:
    if isinstance(res, dict):
        missing = [n for n in names if n not in res]
        if missing:
            raise ProblemError("%s: the reference returns no %s" % (path, ", ".join(missing)))
        return [res[n] for n in names]
    if isinstance(res, (tuple, list)):
        if len(res) != len(names):
            raise ProblemError("%s: the reference returns %d outputs, the definition declares %d (%s)" % (
                path, len(res), len(names), ", ".join(names)))
        return list(res)
    if len(names) != 1:
        raise ProblemError("%s: the reference returns one output, the definition declares %d" % (path, len(names)))
    return [res]

