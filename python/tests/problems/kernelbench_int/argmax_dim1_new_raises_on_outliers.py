import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A kernel whose fast path assumes |x| < 50 and refuses anything else."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if float(x.abs().max()) >= 50:
            raise RuntimeError("input out of the fast path's range")
        return torch.argmax(x, dim=self.dim)
