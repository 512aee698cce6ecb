"""Module captures of a PyTorch model for `parity bisect` (format parity.capture/1, docs/bisect.md).

    parity.capture(model, (ids,), "A")                       # the reference side
    parity.capture(served, (ids,), "B", replay_from="A")     # each module also run on A's inputs
    report = parity.bisect("A", "B", golden="G")             # dict: the JSON of `parity bisect`

capture() runs the model once with a forward pre-hook and a forward hook on every module (the
root and ModuleList/ModuleDict containers excepted, or the names given), in the order modules
START, and writes DIR/capture.json and DIR/capture.safetensors: each module's positional tensor
inputs and its tensor outputs (nested tuples, lists and dicts flattened in order), in their own
dtype. A module that sets `self.parity_routing = (ids, gates[, probs])` in its forward (an MoE
block: top-k expert ids and gates per token, optionally the router's probabilities) gets its
routing recorded. With replay_from=A, each module is called again, hooks off and under no_grad,
on A's recorded inputs (cast to the live argument's dtype and device): the error the module
introduces, measured rather than estimated. A parent's replay runs its children (a decoder layer
replays its attention and MLP), so replay costs about (nesting depth + 1) forward passes; parity
bisect then names the innermost departing module.

Limits: forward hooks do not see keyword arguments in torch 1.x, so a module is recorded with its
positional tensor inputs and REPLAYED WITH THOSE ONLY: a module called with keyword arguments
(an attention mask, position ids) is replayed without them, which is wrong unless their defaults
give the same result; call the modules you bisect positionally, or leave them out (modules=).
A module whose input shapes depend on the routing (an expert run on the tokens routed to it)
gets other shapes in B once a token flips, and bisect refuses captures whose shapes differ:
run experts on fixed shapes or leave them out. Capture in eval mode: dropout in a replay draws
other random numbers. Complex tensors are refused.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

SCHEMA = "parity.capture/1"

_Array = npt.NDArray[Any]

_NP_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I32": np.int32,
              "I64": np.int64}


def _flatten(obj: Any, out: List[Any]) -> None:
    """Tensors of obj in order (tuples, lists and dict values recursively)."""
    import torch
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _flatten(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _flatten(x, out)


def _to_np(t: Any) -> Tuple[_Array, str]:
    """A tensor as (little-endian array of its bytes' dtype, safetensors dtype name)."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "BF16"
    names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
             torch.int32: "I32", torch.int64: "I64"}
    if t.is_complex():
        raise ValueError(f"a {t.dtype} tensor: complex tensors are not captured")
    if t.dtype not in names:
        t = t.to(torch.float32) if t.is_floating_point() else t.to(torch.int64)
    return t.numpy(), names.get(t.dtype, "F32")


def _write_safetensors(path: str, entries: Sequence[Tuple[str, _Array, str]]) -> None:
    header: Dict[str, Any] = {"__metadata__": {"schema": SCHEMA}}
    off = 0
    for name, arr, dt in entries:
        n = arr.nbytes
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, arr, _ in entries:
            f.write(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    os.replace(tmp, path)


def _read_safetensors(path: str) -> Dict[str, _Array]:
    """Every tensor of a safetensors file as a numpy array (BF16 widened to float32, exactly)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} is past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8:8 + n])
    out: Dict[str, _Array] = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if 8 + n + end > len(data):
            raise ValueError(f"{path}: tensor '{name}' ends past the end of the file: truncated?")
        raw = data[8 + n + b:8 + n + end]
        if e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in _NP_DTYPES:
            arr = np.frombuffer(raw, dtype=np.dtype(_NP_DTYPES[e["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor '{name}': dtype {e['dtype']} is not read here")
        out[name] = arr.reshape(e["shape"])
    return out


def read_capture(path: str) -> Tuple[Dict[str, Any], Dict[str, _Array]]:
    """(index, tensors) of a capture directory: the index (capture.json) as a dict and every tensor
    by its name as a numpy array (BF16 widened to float32, exactly). ValueError names a wrong schema
    or a truncated tensors file's first tensor past its end."""
    with open(os.path.join(path, "capture.json")) as f:
        index = json.load(f)
    if index.get("schema") != SCHEMA:
        raise ValueError(f"{path}/capture.json: field 'schema': expected \"{SCHEMA}\", got {index.get('schema')!r}")
    return index, _read_safetensors(os.path.join(path, index.get("tensors", "capture.safetensors")))


class _Recorder:
    def __init__(self, replay: Optional[Tuple[Dict[str, Any], Dict[str, _Array]]]):
        self.order: List[str] = []
        self.calls: Dict[str, int] = {}
        self.rec: Dict[str, Dict[str, Any]] = {}
        self.pending: Dict[int, List[str]] = {}
        self.replaying = False
        self.replay_inputs: Dict[str, List[_Array]] = {}
        if replay is not None:
            index, tensors = replay
            for m in index["modules"]:
                self.replay_inputs[m["name"]] = [tensors[t["tensor"]] for t in m.get("inputs", [])]

    def pre(self, name: str, mod: Any, args: Tuple[Any, ...]) -> None:
        if self.replaying:
            return
        k = self.calls.get(name, 0)
        self.calls[name] = k + 1
        key = name if k == 0 else f"{name}#{k}"
        ins: List[Any] = []
        _flatten(args, ins)
        self.order.append(key)
        self.rec[key] = {"kind": type(mod).__name__, "in": [t.detach().cpu().clone() for t in ins],
                         "out": [], "replay": [], "routing": None}
        self.pending.setdefault(id(mod), []).append(key)

    def post(self, name: str, mod: Any, args: Tuple[Any, ...], output: Any) -> None:
        import torch
        if self.replaying:
            return
        key = self.pending[id(mod)].pop()
        r = self.rec[key]
        outs: List[Any] = []
        _flatten(output, outs)
        r["out"] = [t.detach().cpu().clone() for t in outs]
        routing = getattr(mod, "parity_routing", None)
        if routing is not None:
            r["routing"] = [t.detach().cpu().clone() for t in routing]
        if not self.replay_inputs:
            return
        if key not in self.replay_inputs:
            raise ValueError(f"replay_from: module '{key}' is not in the capture to replay on")
        src = self.replay_inputs[key]
        live: List[Any] = []
        _flatten(args, live)
        if len(src) != len(live):
            raise ValueError(f"replay_from: module '{key}' has {len(src)} recorded inputs, this call {len(live)}")
        it = iter(src)

        def swap(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                v = next(it)
                return torch.from_numpy(np.array(v)).to(dtype=a.dtype, device=a.device).reshape(a.shape)
            if isinstance(a, (tuple, list)):
                return type(a)(swap(x) for x in a)
            return a
        new_args = swap(tuple(args))
        self.replaying = True
        try:
            with torch.no_grad():
                out2 = mod(*new_args)
        finally:
            self.replaying = False
        outs2: List[Any] = []
        _flatten(out2, outs2)
        r["replay"] = [t.detach().cpu().clone() for t in outs2]


def _default_modules(model: Any) -> List[Tuple[str, Any]]:
    import torch.nn as nn
    return [(n, m) for n, m in model.named_modules()
            if n and not isinstance(m, (nn.ModuleList, nn.ModuleDict))]


def capture(model: Any, inputs: Any, path: str, *, replay_from: Optional[str] = None,
            modules: Optional[Iterable[str]] = None, modality: Optional[Sequence[str]] = None,
            name: Optional[str] = None, label: Optional[str] = None) -> Dict[str, Any]:
    """Runs model(*inputs) (a tuple/list of positional arguments, a dict of keyword arguments, or one
    tensor) with forward hooks and writes the capture to directory `path`; returns its index.

    replay_from: a capture directory of the same model (module names) over the same inputs: each
    module is also run on its recorded inputs. modules: the module names to record (default every
    module but the root and ModuleList/ModuleDict containers). modality: one label per token row
    ("text", "image"). name: the model's name in the index (default its class name: the golden
    float64 copy of a model keeps it). label: what was run (default the first parameter's dtype).
    """
    import torch
    replay = read_capture(replay_from) if replay_from else None
    rec = _Recorder(replay)
    chosen = _default_modules(model)
    if modules is not None:
        wanted = set(modules)
        chosen = [(n, m) for n, m in chosen if n in wanted]
        missing = wanted - {n for n, _ in chosen}
        if missing:
            raise ValueError(f"modules: {sorted(missing)[0]!r} is not a module of the model")
    handles = []
    for n, m in chosen:
        handles.append(m.register_forward_pre_hook(lambda mod, args, _n=n: rec.pre(_n, mod, args)))
        handles.append(m.register_forward_hook(lambda mod, args, out, _n=n: rec.post(_n, mod, args, out)))
    try:
        with torch.no_grad():
            if isinstance(inputs, dict):
                model(**inputs)
            elif isinstance(inputs, (tuple, list)):
                model(*inputs)
            else:
                model(inputs)
    finally:
        for h in handles:
            h.remove()
    entries: List[Tuple[str, _Array, str]] = []
    mods: List[Dict[str, Any]] = []
    rows = None

    def tensor(tname: str, t: Any) -> Dict[str, Any]:
        arr, dt = _to_np(t if t.dim() > 0 else t.reshape(1))
        if arr.ndim == 0:
            arr = arr.reshape(1)
        entries.append((tname, arr, dt))
        return {"tensor": tname, "shape": list(arr.shape), "dtype": dt}

    for key in rec.order:
        r = rec.rec[key]
        if not r["out"]:
            continue
        entry: Dict[str, Any] = {"name": key, "kind": r["kind"]}
        entry["inputs"] = [tensor(f"{key}.in.{i}", t) for i, t in enumerate(r["in"])]
        entry["outputs"] = [tensor(f"{key}.out.{i}", t) for i, t in enumerate(r["out"])]
        if rows is None:
            o = r["out"][0]
            rows = int(o.numel() // o.shape[-1]) if o.dim() > 0 and o.shape[-1] else 1
        if r["replay"]:
            if len(r["replay"]) != len(r["out"]):
                raise ValueError(f"module '{key}': its replay gave {len(r['replay'])} tensors, its run {len(r['out'])}")
            entry["replay"] = [tensor(f"{key}.replay.{i}", t) for i, t in enumerate(r["replay"])]
        if r["routing"]:
            ids, gates = r["routing"][0], r["routing"][1]
            k = int(ids.shape[-1])
            rt: Dict[str, Any] = {"topk": k, "experts": 0}
            rt["ids"] = tensor(f"{key}.route.ids", ids.reshape(-1, k).to(torch.int32))["tensor"]
            rt["gates"] = tensor(f"{key}.route.gates", gates.reshape(-1, k))["tensor"]
            if len(r["routing"]) > 2:
                probs = r["routing"][2]
                rt["experts"] = int(probs.shape[-1])
                rt["probs"] = tensor(f"{key}.route.probs", probs.reshape(-1, probs.shape[-1]))["tensor"]
            entry["routing"] = rt
        mods.append(entry)
    params = list(model.parameters())
    index: Dict[str, Any] = {
        "schema": SCHEMA, "id": uuid.uuid4().hex, "model": name or type(model).__name__,
        "path": label or (str(params[0].dtype).replace("torch.", "") if params else "torch"),
        "producer": f"parity.capture (torch {torch.__version__})", "tensors": "capture.safetensors",
        "rows": rows or 0, "modules": mods}
    if modality is not None:
        if len(modality) != index["rows"]:
            raise ValueError(f"modality: {len(modality)} labels for {index['rows']} token rows")
        index["modality"] = list(modality)
    if replay is not None:
        index["replay_of"] = replay[0]["id"]
    os.makedirs(path, exist_ok=True)
    _write_safetensors(os.path.join(path, "capture.safetensors"), entries)
    with open(os.path.join(path, "capture.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    return index


def _parity_cli() -> str:
    for env in ("PARITY_CLI", "PARITY"):
        p = os.environ.get(env)
        if p and os.path.isfile(p):
            return p
    from . import _cli
    p, tried = _cli.binary()
    if p is None:
        raise FileNotFoundError("the parity CLI was not found (set PARITY_CLI); tried: " + ", ".join(tried))
    return p


def bisect(a: str, b: str, *, golden: Optional[str] = None, floor: Optional[str] = None,
           json_out: Optional[str] = None, html_out: Optional[str] = None,
           floor_factor: Optional[float] = None) -> Dict[str, Any]:
    """`parity bisect A B` on two capture directories; returns its JSON report as a dict, with
    "text" (the text report) and "exit_code" (0 no module departs, 1 one does) added. Captures
    that cannot be compared raise ValueError with the CLI's message (exit 3)."""
    with tempfile.TemporaryDirectory() as td:
        jpath = json_out or os.path.join(td, "bisect.json")
        cmd = [_parity_cli(), "bisect", a, b, "--json", jpath]
        if golden:
            cmd += ["--golden", golden]
        if floor:
            cmd += ["--floor", floor]
        if html_out:
            cmd += ["--html", html_out]
        if floor_factor is not None:
            cmd += ["--floor-factor", repr(float(floor_factor))]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 1):
            raise ValueError(p.stderr.strip() or f"parity bisect: exit {p.returncode}")
        with open(jpath) as f:
            report: Dict[str, Any] = json.load(f)
    report["text"] = p.stdout
    report["exit_code"] = p.returncode
    return report
