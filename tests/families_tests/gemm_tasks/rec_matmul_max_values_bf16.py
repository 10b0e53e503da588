"""The max over N of a matmul, values only."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.max(x @ w, dim=-1)[0]


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16), torch.randn(128, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
