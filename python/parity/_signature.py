"""A function that cannot take the arguments parity calls it with: the message names the
expected call (the op's inputs and attributes) next to the function's own signature, instead of
Python's bare "unexpected keyword argument"."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Mapping


class SignatureError(TypeError):
    """fn's parameters do not accept the op's inputs and attributes (a TypeError, as Python's)."""


def expected_call(inputs: Iterable[str], keywords: Iterable[str]) -> str:
    """"fn(dy, x, gamma, ids, *, eps=, V=)": the call parity makes."""
    ins = list(inputs)
    kws = ["%s=" % k for k in keywords]
    return "fn(%s)" % ", ".join(ins + (["*"] + kws if kws else []))


def check_binds(fn: Callable[..., Any], kwargs: Mapping[str, Any], expected: str) -> None:
    """Raise SignatureError (not calling fn) when fn(**kwargs) would fail to bind."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins and C callables: let the call itself tell
        return
    try:
        sig.bind(**kwargs)
    except TypeError as e:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        raise SignatureError("%s%s cannot take parity's arguments, %s: %s" % (name, sig, expected, e)) from None
