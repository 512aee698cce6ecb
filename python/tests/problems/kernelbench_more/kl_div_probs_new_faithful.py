import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, q):
        return (q * (torch.log(q) - torch.log(p))).sum() / p.shape[0]
