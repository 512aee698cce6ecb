import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Breaks exact ties toward the last index (torch.argmax takes the first)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        n = x.shape[self.dim]
        return (n - 1) - torch.argmax(torch.flip(x, [self.dim]), dim=self.dim)
