import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right indices, but it uses its input as scratch space afterwards."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        r = torch.argmax(x, dim=self.dim)
        x.zero_()
        return r
