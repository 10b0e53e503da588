"""A @ B.permute(1, 0) + bias: a permute that swaps the last two dims is a transpose."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, bias):
        return torch.matmul(a, b.permute(1, 0).contiguous()) + bias


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16), torch.randn(64, 128, dtype=torch.bfloat16),
            torch.randn(64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
