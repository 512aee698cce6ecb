"""A small PyTorch language model for parity.capture / parity.bisect (test_capture.py and
bench/bench_bisect.py): random weights from a fixed seed, no downloads, torch 1.13's CPU API.

TinyLM: embedding, `n_layers` pre-norm blocks (RMSNorm, causal attention with softmax scores,
RMSNorm, a SwiGLU MLP; the block `moe_layer` has an MoE instead: router, softmax, top-k,
every expert on every row, gate-weighted combine; it sets self.parity_routing), a final RMSNorm
and the classifier. Three degraded versions of one module each, swapped in by swap():
BF16RMSNorm (the whole norm in bf16), BF16ScoreAttention (q k^T in bf16), BF16CombineMoE (the
combine accumulated in a bf16 buffer). reorder() is a faithful repeat of the float32 model: every
GEMM as two half-K partial sums, the norms' sum of squares in two halves, the scores' q k^T in
two halves, the combine's top-k terms in reverse order -- another summation order, as two real
runs differ (the floor).
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Lin(nn.Module):
    """y = x W^T; split: the same product as two half-K partial sums."""

    def __init__(self, din, dout):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dout, din) / math.sqrt(din))
        self.split = False

    def forward(self, x):
        if not self.split:
            return F.linear(x, self.weight)
        h = x.shape[-1] // 2
        return F.linear(x[..., :h], self.weight[:, :h]) + F.linear(x[..., h:], self.weight[:, h:])


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))
        self.eps = eps
        self.split = False

    def mean_sq(self, x):
        if self.split:
            h = x.shape[-1] // 2
            a, b = x[..., :h], x[..., h:]
            return ((b * b).sum(-1, keepdim=True) + (a * a).sum(-1, keepdim=True)) / x.shape[-1]
        return (x * x).mean(-1, keepdim=True)

    def forward(self, x):
        return x * torch.rsqrt(self.mean_sq(x) + self.eps) * self.weight


class BF16RMSNorm(RMSNorm):
    """The norm computed in bf16 (input, mean of squares, scale, weight), returned in x's dtype."""

    def forward(self, x):
        h = x.to(torch.bfloat16)
        return (h * torch.rsqrt(self.mean_sq(h) + self.eps) * self.weight.to(torch.bfloat16)).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = Lin(d, d), Lin(d, d), Lin(d, d), Lin(d, d)
        self.split = False

    def scores(self, q, k):
        if self.split:
            h = q.shape[-1] // 2
            return q[..., :h] @ k[..., :h].transpose(-1, -2) + q[..., h:] @ k[..., h:].transpose(-1, -2)
        return q @ k.transpose(-1, -2)

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.n_heads
        q, k, v = (p(x).view(b, t, self.n_heads, hd).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        s = self.scores(q, k).to(x.dtype) / math.sqrt(hd)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        p = torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1)
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, t, d))


class BF16ScoreAttention(Attention):
    """The scores q k^T computed in bf16 (softmax and the rest in x's dtype)."""

    def scores(self, q, k):
        return q.to(torch.bfloat16) @ k.to(torch.bfloat16).transpose(-1, -2)


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate, self.up, self.down = Lin(d, hidden), Lin(d, hidden), Lin(hidden, d)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    def __init__(self, d, hidden, n_experts=4, k=2):
        super().__init__()
        self.router = Lin(d, n_experts)
        self.experts = nn.ModuleList(MLP(d, hidden) for _ in range(n_experts))
        self.k = k
        self.split = False

    def picked(self, ys, ids, j):
        return ys[ids[:, j], torch.arange(ids.shape[0])]

    def combine(self, ys, ids, gates):
        out = torch.zeros_like(ys[0])
        for j in (range(self.k - 1, -1, -1) if self.split else range(self.k)):
            out = out + gates[:, j:j + 1] * self.picked(ys, ids, j)
        return out

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        probs = torch.softmax(self.router(flat), dim=-1)
        gates, ids = torch.topk(probs, self.k, dim=-1)
        gates = gates / gates.sum(-1, keepdim=True)
        # every expert on every row: the experts' shapes do not depend on the routing
        ys = torch.stack([e(flat) for e in self.experts])
        self.parity_routing = (ids, gates, probs)
        return self.combine(ys, ids, gates).reshape(x.shape)


class BF16CombineMoE(MoE):
    """The top-k combine accumulated in a bf16 buffer."""

    def combine(self, ys, ids, gates):
        out = torch.zeros_like(ys[0], dtype=torch.bfloat16)
        for j in range(self.k):
            out = out + (gates[:, j:j + 1] * self.picked(ys, ids, j)).to(torch.bfloat16)
        return out.to(ys.dtype)


class Block(nn.Module):
    def __init__(self, d, n_heads, hidden, moe):
        super().__init__()
        self.attn_norm, self.attn, self.ffn_norm = RMSNorm(d), Attention(d, n_heads), RMSNorm(d)
        if moe:
            self.moe = MoE(d, hidden)
        else:
            self.mlp = MLP(d, hidden)

    def forward(self, x):
        h = x + self.attn(self.attn_norm(x))
        ffn = self.moe if hasattr(self, "moe") else self.mlp
        return h + ffn(self.ffn_norm(h))


class TinyLM(nn.Module):
    def __init__(self, vocab=96, d=64, n_heads=4, hidden=128, n_layers=3, moe_layer=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, n_heads, hidden, i == moe_layer) for i in range(n_layers))
        self.final_norm = RMSNorm(d)
        self.lm_head = Lin(d, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.final_norm(x))


class OtherLM(TinyLM):
    """Another model (its class name is the capture's model name)."""


# The degraded variants: (name, module path, class swapped in).
VARIANTS = [("bf16 norm", "layers.1.attn_norm", BF16RMSNorm),
            ("bf16 attention scores", "layers.1.attn", BF16ScoreAttention),
            ("bf16 expert combine", "layers.2.moe", BF16CombineMoE)]


def make(seed=0, cls=TinyLM, **kw):
    torch.manual_seed(seed)
    return cls(**kw).eval()


def token_ids(batch=2, seq=24, vocab=96, seed=1):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def swap(model, path, cls):
    """A copy of model with the module at `path` replaced by an instance of cls (same weights)."""
    m = copy.deepcopy(model)
    parent, _, leaf = path.rpartition(".")
    old = getattr(m.get_submodule(parent), leaf)
    new = cls.__new__(cls)
    new.__dict__.update(copy.deepcopy(old).__dict__)
    setattr(m.get_submodule(parent), leaf, new)
    return m


def reorder(model):
    """A copy of model with every reorderable sum in another (faithful) order."""
    m = copy.deepcopy(model)
    for x in m.modules():
        if hasattr(x, "split"):
            x.split = True
    return m
