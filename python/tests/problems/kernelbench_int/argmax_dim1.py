"""An argmax problem in KernelBench's format, written for parity's tests (not from KernelBench):
an integer (int64) output, judged exactly."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Argmax over dim 1."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


batch_size = 16
dim1 = 256
dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]
