"""Linear, then a sum over N that keeps the dim."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(128, 64, dtype=torch.bfloat16)

    def forward(self, x):
        return torch.sum(self.linear(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
