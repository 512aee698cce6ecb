"""Helpers the parity.problems tests share: the `parity problem` CLI run as a user runs it, and a
safetensors writer for workload lines that load their inputs from files (the format's layout: an
8-byte little-endian header length, a JSON header of dtype, shape and data offsets, the raw
bytes)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cli(*args):
    """`python -m parity problem ARGS` with the source tree's package; the CompletedProcess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (os.path.dirname(HERE), env.get("PYTHONPATH", "")) if x)
    return subprocess.run([sys.executable, "-m", "parity", "problem"] + list(args), capture_output=True,
                          text=True, env=env, timeout=600)


def write_safetensors(path, tensors):
    """{key: torch tensor} (bfloat16, float32, int32 or int64) as a .safetensors file at path."""
    import torch
    names = {torch.bfloat16: "BF16", torch.float32: "F32", torch.int32: "I32", torch.int64: "I64"}
    head, blobs, off = {}, [], 0
    for k, t in tensors.items():
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).contiguous().numpy().tobytes()
        head[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(head).encode()
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
