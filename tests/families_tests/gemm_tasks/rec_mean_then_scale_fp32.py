"""A pointwise op after the reduction over N (applied to each row's value)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.mean(a @ b, dim=-1) * 2.0


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16, 48)]


def get_init_inputs():
    return []
