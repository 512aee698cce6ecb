"""A pytest file a kernel author can copy: replace my_kernel with yours.

    pytest examples/python/test_my_kernel.py

- test_faithful: parity.check over the quick workloads, as an assertion whose message shows the
  worst element (got, ref, tolerance), rows failed, the diagnosis and a one-line reproducer.
- test_case: one test per workload (pytest ids are the workload names), for kernels you run
  yourself (e.g. inside your own framework's setup): hand out inputs, judge your outputs.
- test_isolated: the kernel in a spawned worker, so a segfault or hang is a failed test,
  not a dead pytest session.
- test_cuda: the same on the GPU; skipped (visibly) without one.
"""
import pytest
import torch

import parity
from parity.testing import assert_faithful

OP = "embedding_rmsnorm_bwd"


def my_kernel(dy, x, gamma, ids, eps, V):
    """RMSNorm backward in fp32 autograd; dE by index_add_ into fp32"""
    x = x.float().requires_grad_(True)
    g = gamma.float().requires_grad_(True)
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    (x * rms * g).backward(dy.float())
    dE = torch.zeros(V, x.shape[1], dtype=torch.float32, device=x.device).index_add_(0, ids.long(), x.grad)
    return dE, g.grad


def test_faithful():
    assert_faithful(OP, my_kernel, workloads="quick")


@pytest.mark.parametrize("case", parity.cases(OP), ids=str)
def test_case(case):
    x = case.inputs(like="torch")
    case.judge(my_kernel(**x, **x.dims)).assert_ok()


def test_isolated():
    assert_faithful(OP, my_kernel, workloads=["text"], isolate=True, timeout=60)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda():
    assert_faithful(OP, my_kernel, workloads=["text"], device="cuda")
