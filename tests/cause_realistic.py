"""Realistic bugs written in PyTorch for the cause table (tests/cause_table.py, issue #36): the
way each bug appears in real code, with the cause it plants, plus faithful fp32 versions that must
get no cause. Each function is fn(**inputs, **attrs) for parity.check on a built-in op; inputs
arrive as bf16 torch tensors."""
import json

import torch
import torch.nn.functional as F

import parity


# ---- RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * gamma ----

def _rms(x, gamma, eps, divisor=None, use_gamma=True):
    xf = x.float()
    ms = xf.pow(2).sum(-1, keepdim=True) / (divisor or x.shape[-1])
    y = xf * torch.rsqrt(ms + eps)
    return y * gamma.float() if use_gamma else y


def rmsnorm_fp32(x, gamma, eps):
    """faithful: fp32 throughout"""
    return _rms(x, gamma, eps)


def rmsnorm_eps_1e6(x, gamma, eps):
    """a wrapper that passes eps 1e-6 where the op's is 1e-5"""
    return _rms(x, gamma, 1e-6)


def rmsnorm_gamma_ignored(x, gamma, eps):
    """gamma never applied (a fused kernel's epilogue that forgot the weight)"""
    return _rms(x, gamma, eps, use_gamma=False)


def rmsnorm_unbiased(x, gamma, eps):
    """the mean of squares divided by D-1 (torch.var's unbiased habit)"""
    return _rms(x, gamma, eps, divisor=x.shape[-1] - 1)


# ---- log-softmax / cross-entropy on bf16 logits, as torch computes them ----

def log_softmax_fp32(logits):
    """faithful: upcast to fp32 first"""
    return torch.log_softmax(logits.float(), dim=-1)


def log_softmax_bf16(logits):
    """torch.log_softmax on the bf16 logits themselves (bf16 result)"""
    return torch.log_softmax(logits, dim=-1)


def cross_entropy_bf16(logits, targets):
    """F.cross_entropy on bf16 logits, dlogits by autograd (bf16)"""
    lg = logits.detach().clone().requires_grad_(True)
    loss = F.cross_entropy(lg, targets.long(), reduction="none")
    loss.sum().backward()
    return loss.detach(), lg.grad


# ---- GEMM ----

def gemm_fp32(A, B):
    """faithful: fp32 matmul"""
    return A.float() @ B.float()


def gemm_ftz(A, B):
    """fp32 matmul with the CPU's denormals-are-zero / flush-to-zero mode on (torch.set_flush_denormal)"""
    if not torch.set_flush_denormal(True):
        raise NotImplementedError("this CPU has no flush-to-zero mode")
    try:
        return A.float() @ B.float()
    finally:
        torch.set_flush_denormal(False)


def gemm_ktail_dropped(A, B):
    """a 64-wide K loop that never handles the K % 64 tail"""
    k = A.shape[1] - A.shape[1] % 64
    return A[:, :k].float() @ B[:k].float()


# ---- attention ----

def _mask(s, causal):
    if causal:
        t = s.shape[-1]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return s


def _cap(s, softcap):
    return softcap * torch.tanh(s / softcap) if softcap else s


def attention_fp32(Q, K, V, scale, softcap, causal):
    """faithful: scores, softmax and PV in fp32"""
    s = _mask(_cap(Q.float() @ K.float().transpose(-1, -2) * scale, softcap), causal)
    return torch.softmax(s, dim=-1) @ V.float(), torch.logsumexp(s, dim=-1)


def attention_eager_bf16(Q, K, V, scale, softcap, causal):
    """Hugging Face eager attention: QK^T and the scaling in bf16, softmax in fp32"""
    s = torch.matmul(Q, K.transpose(-1, -2)) * scale
    s = _mask(_cap(s.float(), softcap), causal)
    return torch.softmax(s, dim=-1) @ V.float(), torch.logsumexp(s, dim=-1)


def attention_bwd_autograd(Q, K, V, O, dO, LSE, scale, softcap, causal):
    """autograd through fp32 attention: it recomputes O instead of using the given one"""
    q, k, v = (t.float().requires_grad_(True) for t in (Q, K, V))
    s = _mask(_cap(q @ k.transpose(-1, -2) * scale, softcap), causal)
    (torch.softmax(s, dim=-1) @ v).backward(dO.float())
    return q.grad, k.grad, v.grad


# ---- MoE router + combine ----

def moe_torch_topk(router_logits, expert_out, k, renorm):
    """fp32 softmax, torch.topk (its own tie order), fp32 combine"""
    p = torch.softmax(router_logits.float(), dim=-1)
    w, idx = torch.topk(p, int(k), dim=-1)
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    gates = torch.zeros_like(p).scatter(1, idx, w)
    sel = expert_out.float()[torch.arange(p.shape[0])[:, None], idx]
    return (w[..., None] * sel).sum(1), gates


# ---- embedding backward ----

def embedding_bwd_index_add_bf16(dY, ids, V):
    """index_add_ into a bf16 buffer (torch 1.13 rounds after every addition)"""
    return torch.zeros(V, dY.shape[1], dtype=torch.bfloat16).index_add_(0, ids.long(), dY)


def _index_add_rounds_each_add():
    src = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0)).bfloat16()
    got = torch.zeros(1, 8, dtype=torch.bfloat16).index_add_(0, torch.zeros(4096, dtype=torch.long), src)
    return bool(((got[0].double() - src.double().sum(0)).abs() > 1.0).any())


def cases():
    """(op, fn, planted words or None for faithful)."""
    c = [
        ("rmsnorm_fwd", rmsnorm_fp32, None),
        ("rmsnorm_fwd", rmsnorm_eps_1e6, ("parameter",)),
        ("rmsnorm_fwd", rmsnorm_gamma_ignored, ("ignored-input",)),
        ("rmsnorm_fwd", rmsnorm_unbiased, ("parameter",)),
        ("log_softmax", log_softmax_fp32, None),
        ("log_softmax", log_softmax_bf16, ("intermediate-rounding",)),
        ("cross_entropy", cross_entropy_bf16, ("intermediate-rounding",)),
        ("gemm", gemm_fp32, None),
        ("gemm", gemm_ftz, ("flush-to-zero",)),
        ("gemm", gemm_ktail_dropped, ("dropped-terms",)),
        ("attention_fwd", attention_fp32, None),
        ("attention_fwd", attention_eager_bf16, ("intermediate-rounding",)),
        ("attention_bwd", attention_bwd_autograd, ("ignored-input",)),
        ("moe_router_combine", moe_torch_topk, ("tie",)),
    ]
    if _index_add_rounds_each_add():  # torch 2.x sums duplicates in fp32 first: no bf16 accumulator
        c.append(("embedding_bwd", embedding_bwd_index_add_bf16, ("accumulator",)))
    return c


def judge(op, fn, seed):
    return parity.check(op, fn, workloads="quick", seed=seed).to_json()


if __name__ == "__main__":
    for op, fn, planted in cases():
        d = json.loads(judge(op, fn, 1))
        k = d["kernels"][0]
        print(op, fn.__name__, k["verdict"], planted, (k.get("diagnosis") or {}).get("cause"))
