"""parity.logprobs: how far apart two sets of per-token logprobs are, slice by slice, against a
noise floor: `parity logprobs` on arrays (compare) or on dump files (compare_files). The arrays
are handed to the library as an in-memory safetensors dump (the layout `parity logprobs` reads
from a trainer's file), so both entry points run the same code and give the same numbers."""
from __future__ import annotations

import json
import os
import struct
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from ._lib import b, errbuf, lib, take_str


class LogprobReport:
    """overall: the CLI's JSON `overall` (same keys, same values); slices: the JSON's slices;
    verdict: "ok" or "drift" (the CLI's exit code 0 / 1); text: the CLI's text report;
    to_json(): the whole JSON report (docs/logprobs.md); _repr_html_: the CLI's HTML page."""

    def __init__(self, js: str, text: str, html: Optional[str], exit_code: int) -> None:
        self._json = js
        self._d: Dict[str, Any] = json.loads(js)
        self.overall: Dict[str, Any] = self._d.get("overall", {})
        self.slices: List[Dict[str, Any]] = self._d.get("slices", [])
        self.worst_tokens: List[Dict[str, Any]] = self._d.get("worst_tokens", [])
        self.divergences: List[Dict[str, Any]] = self._d.get("divergences", [])
        self.counts: Dict[str, Any] = self._d.get("counts", {})
        self.text = text
        self._html = html
        self.exit_code = exit_code
        self.ok = exit_code == 0
        self.verdict = "ok" if exit_code == 0 else "drift"

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> str:
        return self._json

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = json.loads(self._json)
        return d

    def _repr_html_(self) -> str:
        if self._html:  # the CLI's page (html=True): plots included
            return self._html
        import html
        return "<pre>%s</pre>" % html.escape(self.text)


_ST_FLOAT = {"float64": "F64", "float32": "F32", "float16": "F16"}
_ST_INT = {"int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def _np(x: Any, what: str) -> Any:
    if x is None:
        return None
    if _arrays.is_torch(x):
        a, dt = _arrays.to_host(x) if x.is_floating_point() else (x.detach().cpu().contiguous().numpy(), None)
        return a, dt
    a = np.ascontiguousarray(np.asarray(x))
    if a.dtype.name == "bfloat16":
        return a.view(np.uint16), "bf16"
    return a, None


def _safetensors(tensors: Dict[str, Tuple[Any, str]], metadata: Dict[str, str]) -> bytes:
    """A safetensors file in memory: 8-byte header length, JSON header, the data."""
    header: Dict[str, Any] = {}
    blobs: List[bytes] = []
    off = 0
    for name, (a, st_dtype) in tensors.items():
        raw = a.tobytes()
        header[name] = {"dtype": st_dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def _dump(lp: Any, ids: Any, mask: Any, modality: Any) -> bytes:
    a, dt = _np(lp, "logprobs")
    if dt == "bf16":
        tensors = {"logprobs": (a, "BF16")}
    else:
        if a.dtype.name not in _ST_FLOAT:
            a = a.astype(np.float64)
        tensors = {"logprobs": (a, _ST_FLOAT[a.dtype.name])}
    if a.ndim not in (1, 2):
        raise ValueError("logprobs must be 1-D [positions] or 2-D [sequences, positions], got shape %s" % (a.shape,))
    meta = {}
    for name, x in (("token_ids", ids), ("mask", mask)):
        if x is None:
            continue
        v = _np(x, name)[0]
        if v.shape != a.shape:
            raise ValueError("%s has shape %s; logprobs %s" % (name, v.shape, a.shape))
        if v.dtype.name not in _ST_INT:
            v = v.astype(np.int64)
        tensors[name] = (v, _ST_INT[v.dtype.name])
    if modality is not None:
        m = np.asarray(modality)
        if m.shape != a.shape:
            raise ValueError("modality has shape %s; logprobs %s" % (m.shape, a.shape))
        if m.dtype.kind in "USO":  # names: factorised, the names travel in the metadata
            names = sorted(set(str(s) for s in m.reshape(-1)))
            if any("," in s for s in names):
                raise ValueError("modality names may not contain ','")
            idx = {s: i for i, s in enumerate(names)}
            m = np.vectorize(lambda s: idx[str(s)], otypes=[np.int32])(m)
            meta["modality_names"] = ",".join(names)
        tensors["modality"] = (np.ascontiguousarray(m.astype(np.int32)), "I32")
    return _safetensors(tensors, meta)


def _run(srcs: Sequence[Tuple[Optional[bytes], Optional[str]]], options: Dict[str, Any],
         html: bool) -> LogprobReport:
    """srcs: three (buffer or None, name) pairs for A, B, floor (None, None when absent)."""
    fd, jpath = tempfile.mkstemp(prefix="parity-lp-", suffix=".json")
    os.close(fd)
    hpath = jpath[:-5] + ".html" if html else None
    text = _c_char_pp()
    err = errbuf()
    keep = []
    args = []
    for buf, name in srcs:
        if buf is None:
            args += [None, 0, b(name) if name else None]
        else:
            cb = np.frombuffer(buf, dtype=np.uint8)
            keep.append(cb)
            args += [cb.ctypes.data, len(buf), b(name)]
    try:
        rc = lib.parity_py_lp_compare(*args, b(json.dumps(options)), b(jpath), b(hpath) if hpath else None,
                                      text, err, len(err))
        if rc < 0:
            raise ValueError(err.value.decode())
        with open(jpath) as f:
            js = f.read()
        page = None
        if hpath:
            with open(hpath) as f:
                page = f.read()
        return LogprobReport(js, take_str(text[0]) or "", page, rc)
    finally:
        for p in (jpath, hpath):
            if p:
                try:
                    os.unlink(p)
                except OSError:
                    pass


def _c_char_pp() -> Any:
    import ctypes
    return (ctypes.c_void_p * 1)()


_OPTS = ("dtype", "k3_alarm", "dlogprob_alarm", "floor_factor", "threads", "worst", "no_slices", "moe")


def _options(kw: Dict[str, Any], extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    o = {}
    for k, v in kw.items():
        if k not in _OPTS:
            raise TypeError("unknown option %r (options: %s)" % (k, ", ".join(_OPTS)))
        if v is not None:
            o[k] = v
    o.update(extra or {})
    return o


def compare(a: Any, b: Any, *, floor: Any = None, token_ids_a: Any = None, token_ids_b: Any = None,
            mask: Any = None, modality: Any = None, slice_by: Optional[str] = None, html: bool = False,
            **options: Any) -> LogprobReport:
    """Compare logprobs b against a (delta = b - a), as `parity logprobs` does. a, b: arrays
    [positions] or [sequences, positions] (numpy, torch; f64/f32/f16/bf16); floor: a second
    array from the same engine as a (A2), else the analytic floor of the dtype; token_ids_*:
    ids per position (divergences end a sequence's comparison); mask: 1 where a position counts
    (both sides); modality: ints or names per position. slice_by names a JSONL field, so it
    applies to compare_files only. Options: dtype, k3_alarm, dlogprob_alarm, floor_factor,
    threads, worst, no_slices, moe (the CLI's flags). html=True keeps the HTML page for
    Jupyter (_repr_html_)."""
    if slice_by is not None:
        raise ValueError("slice_by names a field of each JSONL record; arrays have none "
                         "(use modality= for per-token groups, or compare_files on JSONL dumps)")
    da = _dump(a, token_ids_a, mask, modality)
    db = _dump(b, token_ids_b if token_ids_b is not None else token_ids_a, mask, modality)
    df = _dump(floor, token_ids_a, mask, modality) if floor is not None else None
    srcs = [(da, "a.safetensors"), (db, "b.safetensors"), (df, "floor.safetensors") if df else (None, None)]
    return _run(srcs, _options(options), html)


def compare_files(path_a: Union[str, "os.PathLike[str]"], path_b: Union[str, "os.PathLike[str]"], *,
                  floor: Union[None, str, "os.PathLike[str]"] = None, format: Optional[str] = None,
                  format_a: Optional[str] = None, format_b: Optional[str] = None, slice_by: Optional[str] = None,
                  html: bool = False, **options: Any) -> LogprobReport:
    """`parity logprobs path_a path_b [--floor-a floor]` on dumps in any format the CLI reads
    (npy, safetensors, jsonl, openai-chat, openai-completions, vllm, sglang)."""
    extra = {}
    fa, fb = format_a or format, format_b or format
    if fa:
        extra["format_a"] = fa
    if fb:
        extra["format_b"] = fb
    if slice_by:
        extra["slice_by"] = slice_by
    for p in (path_a, path_b) + ((floor,) if floor else ()):
        if not os.path.exists(p):
            raise FileNotFoundError(p)
    srcs = [(None, str(path_a)), (None, str(path_b)), (None, str(floor)) if floor else (None, None)]
    return _run(srcs, _options(options, extra), html)
