"""A matrix-vector product."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, v):
        return torch.matmul(a, v)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16)]


def get_init_inputs():
    return []
