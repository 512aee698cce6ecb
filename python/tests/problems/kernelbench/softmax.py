"""A softmax problem in KernelBench's format, written for parity's tests (not from KernelBench)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 24
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
