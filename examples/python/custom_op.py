"""Declaring an op parity does not ship -- fused SwiGLU forward and rotary embedding -- and
judging implementations of it (docs/custom-ops.md walks through this file).

    PYTHONPATH=python PARITY_PY_LIB=build/python/libparity_python.so python examples/python/custom_op.py
"""
import numpy as np

import parity

# y = silu(a) * b, elementwise: no reduction, so the tolerance is the empirical floor.
swiglu = parity.Op(
    "swiglu_fwd",
    inputs={"a": parity.Input(("N", "H"), role="activation"),
            "b": parity.Input(("N", "H"), role="activation")},
    outputs={"y": ("N", "H")},
    reference=lambda a, b: a / (1 + np.exp(-a)) * b,   # float64 in, float64 out (float32 in, float32 out)
    shapes={"N": [64, 4096], "H": [256, 11008]})        # first: the base workload; largest: production


def rope_reference(x, pos, base):
    """Rotary embedding, half-split pairing (GPT-NeoX / Llama): x (N, D), pos (N,) positions.
    Written so float32 x gives float32 math (the contract evaluation): no float64 constants."""
    half = x.shape[-1] // 2
    inv = np.asarray(base, dtype=x.dtype) ** (-(np.arange(half, dtype=x.dtype) * 2) / x.shape[-1])
    ang = pos[:, None].astype(x.dtype) * inv[None, :]
    c, s = np.cos(ang), np.sin(ang)
    x1, x2 = x[:, :half], x[:, half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


rope = parity.Op(
    "rope_fwd",
    inputs={"x": parity.Input(("N", "D"), role="activation"),
            "pos": parity.Input(("N",), role="token_ids", vocab="P")},   # positions in [0, P)
    outputs={"y": ("N", "D")},
    reference=rope_reference,
    attrs={"base": 10000.0},
    shapes={"N": [128, 8192], "D": [128], "P": [4096, 131072]},
    fixed=("D",))                                       # the pairing needs an even D: no odd D


def swiglu_torch(a, b):
    """torch fp32: silu(a) * b"""
    import torch
    return torch.nn.functional.silu(a.float()) * b.float()


def swiglu_bf16_intermediate(a, b):
    """the unfused bf16 path: silu(a) stored in bf16 before the product"""
    import torch
    return (torch.nn.functional.silu(a.float()).bfloat16().float() * b.float())


if __name__ == "__main__":
    for fn in (swiglu_torch, swiglu_bf16_intermediate):
        print(parity.check(swiglu, fn, workloads="quick", dtype="bf16", like="torch"))
    print(parity.power(swiglu, dtype="bf16"))
