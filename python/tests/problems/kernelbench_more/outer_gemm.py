import torch
import torch.nn as nn


class Model(nn.Module):
    """A tall-skinny product whose output (M x M) is far larger than its inputs (M x 16 each);
    written for parity's tests."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


M = 8192
K = 16


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, M)]


def get_init_inputs():
    return []
