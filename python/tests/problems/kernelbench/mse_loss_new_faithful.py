import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        d = (predictions - targets)
        return (d * d).sum() / d.numel()
