"""F.linear with a weight and bias parameter, then SiLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(64, 128, dtype=torch.float16))
        self.bias = nn.Parameter(torch.randn(64, dtype=torch.float16))

    def forward(self, x):
        return F.silu(F.linear(x, self.weight, self.bias))


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.float16)]


def get_init_inputs():
    return []
