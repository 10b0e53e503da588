"""An operand computed by a pointwise op."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.matmul(x * 2.0, w)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16, 48)]


def get_init_inputs():
    return []
