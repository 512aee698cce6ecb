"""safetensors files for the examples in this folder, with the standard library and numpy only.

The examples (fused_bwd.py, attention.py, gemm_torch.py, moe_router_combine.py) read the inputs
`parity gen` writes and write the outputs `parity compare` reads. They need PyTorch and numpy
(Debian 12: `apt-get install python3-torch`, which brings python3-numpy) and nothing from PyPI:
the safetensors format is small enough to read and write here (docs/safetensors.md):

    bytes 0..8     N, unsigned 64-bit little-endian: the header's length
    bytes 8..8+N   JSON: {"NAME": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
                   "__metadata__": {str: str}}, padded with spaces
    bytes 8+N..    the tensors' bytes, little-endian, row-major; offsets relative to here

So `/usr/bin/python3 examples/pytorch/fused_bwd.py in.safetensors out.safetensors` works on a
machine with Debian's torch and no `safetensors` package; files written here are read by
`parity compare` and by huggingface's safetensors alike (tests/cli_pytorch.sh).

    from st_io import load, require, save
    torch = require("torch")
    tensors, meta = load("in.safetensors")          # {name: CPU tensor}, {key: value}
    save({"dE": dE, "dgamma": dgamma}, "out.safetensors")
"""
import importlib
import json
import os
import struct
import sys


def require(module):
    """import module, or exit (status 3, as parity's input or environment errors) with a message
    that names the script, the interpreter and what to install"""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        who = sys.argv[0] or "this example"
        sys.stderr.write(
            "%s needs %s, which this Python (%s, %s) cannot import: %s.\n"
            "Install it -- Debian 12: apt-get install python3-torch python3-numpy, then run it "
            "with /usr/bin/python3; elsewhere: pip install torch numpy -- or run this file with a "
            "Python that has it (the `python` first on PATH may be another interpreter). The "
            "`safetensors` package is not needed.\n"
            % (who, {"torch": "PyTorch", "numpy": "numpy"}.get(module, module), sys.executable,
               sys.version.split()[0], e))
        sys.exit(3)


np = require("numpy")
torch = require("torch")

# safetensors dtype -> (numpy dtype of the stored bytes, torch dtype). bf16 travels as int16 bits
# (numpy has none) and is reinterpreted by torch without a copy. The dtypes parity reads and writes.
_DTYPES = {
    "F64": ("<f8", torch.float64), "F32": ("<f4", torch.float32), "F16": ("<f2", torch.float16),
    "BF16": ("<i2", torch.bfloat16), "I64": ("<i8", torch.int64), "I32": ("<i4", torch.int32),
    "I16": ("<i2", torch.int16), "I8": ("i1", torch.int8), "U8": ("u1", torch.uint8),
    "BOOL": ("?", torch.bool),
}
_CODES = {tdt: (code, npdt) for code, (npdt, tdt) in _DTYPES.items()}
_MAX_HEADER = 100_000_000  # the reference implementation's limit


def load(path):
    """({name: CPU tensor}, {metadata key: value}) of a safetensors file. The tensors share one
    buffer read from the file (no copy per tensor); a malformed file raises ValueError naming it."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("%s: %d bytes, not a safetensors file (no 8-byte header length)" % (path, size))
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER or n > size - 8:
            raise ValueError("%s: header length %d does not fit the file (%d bytes)" % (path, n, size))
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except ValueError as e:
            raise ValueError("%s: header is not JSON: %s" % (path, e))
        data = bytearray(size - 8 - n)  # writable, so torch.from_numpy does not warn
        if f.readinto(memoryview(data)) != len(data):
            raise ValueError("%s: short read" % path)
    if not isinstance(header, dict):
        raise ValueError("%s: header is not a JSON object" % path)
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, h in header.items():
        try:
            npdt, tdt = _DTYPES[h["dtype"]]
            shape = [int(d) for d in h["shape"]]
            begin, end = (int(o) for o in h["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("%s: tensor '%s': dtype %r unsupported (%s) or shape/data_offsets malformed"
                             % (path, name, h.get("dtype") if isinstance(h, dict) else h, " ".join(_DTYPES)))
        count = 1
        for d in shape:
            count *= d
        item = np.dtype(npdt).itemsize
        if min(shape + [0]) < 0 or not 0 <= begin <= end <= len(data) or end - begin != count * item:
            raise ValueError("%s: tensor '%s': shape %s x %d bytes does not match data_offsets [%d, %d] "
                             "in a %d-byte buffer" % (path, name, shape, item, begin, end, len(data)))
        a = np.frombuffer(data, npdt, count, begin)
        if begin % item:  # unaligned: a copy (numpy and torch want aligned elements)
            a = a.copy()
        t = torch.from_numpy(a.reshape(shape))
        tensors[name] = t.view(tdt) if h["dtype"] == "BF16" else t
    return tensors, dict(meta)


def save(tensors, path, metadata=None):
    """Write {name: tensor} (any device; copied to the CPU, made contiguous) and optional
    {str: str} metadata as a safetensors file: header padded with spaces so the data starts
    8-byte aligned, tensors packed in the given order, as the reference writer does. Written to
    a temporary file beside path, then renamed."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in _CODES:
            raise ValueError("%s: tensor '%s': dtype %s not writable here (%s)"
                             % (path, name, t.dtype, ", ".join(str(d) for d in _CODES)))
        code, npdt = _CODES[t.dtype]
        a = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
        raw = a.astype(npdt, copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = "%s.tmp%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for raw in blobs:
                f.write(raw)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
