"""An RMSNorm problem in KernelBench's format, written for parity's tests (not from KernelBench)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """RMSNorm over the last dimension with a gamma and eps."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        ms = torch.mean(x * x, dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * gamma


batch_size = 32
features = 384
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, features), torch.ones(features)]


def get_init_inputs():
    return [eps]
