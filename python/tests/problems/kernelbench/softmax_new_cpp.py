"""A KernelBench-style solution written for parity's tests: the softmax in C++ for the CPU, built
with torch's load_inline (as KernelBench's CUDA solutions are, without CUDA sources). ModelNew
takes `tail` columns off the row sum when the environment asks (PARITY_TEST_SOFTMAX_TAIL), so one
build serves a faithful and a dropped-tail kernel."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp = r"""
#include <torch/extension.h>
#include <cmath>

// Softmax over dim 1 of a 2-D float tensor; the sum leaves out the last `tail` columns.
torch::Tensor softmax_rows(torch::Tensor x, int64_t tail) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.size(1), rows = xc.size(0);
    const float *px = xc.data_ptr<float>();
    float *py = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; r++) {
        const float *a = px + r * n;
        float m = a[0];
        for (int64_t j = 1; j < n; j++) m = a[j] > m ? a[j] : m;
        float s = 0.0f;
        for (int64_t j = 0; j < n - tail; j++) s += std::exp(a[j] - m);
        for (int64_t j = 0; j < n; j++) py[r * n + j] = std::exp(a[j] - m) / s;
    }
    return y;
}
"""

_mod = load_inline(name="parity_test_softmax_cpp", cpp_sources=_cpp, functions=["softmax_rows"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.tail = int(os.environ.get("PARITY_TEST_SOFTMAX_TAIL", "0"))

    def forward(self, x):
        return _mod.softmax_rows(x, self.tail)
