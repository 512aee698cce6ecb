import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x, gamma):
        inv = 1.0 / torch.sqrt(x.pow(2).sum(-1, keepdim=True) / x.shape[-1] + self.eps)
        return gamma * (x * inv)
