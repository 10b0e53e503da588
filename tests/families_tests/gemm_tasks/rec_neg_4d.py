"""A 4-d batched matmul."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(2, 2, 32, 16), torch.randn(2, 2, 16, 48)]


def get_init_inputs():
    return []
