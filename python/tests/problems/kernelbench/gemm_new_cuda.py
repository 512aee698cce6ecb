import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = "// a CUDA kernel would be here"
_mod = load_inline(name="gemm_cuda", cpp_sources="", cuda_sources=_src, functions=["gemm"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _mod.gemm(A.cuda(), B.cuda())
