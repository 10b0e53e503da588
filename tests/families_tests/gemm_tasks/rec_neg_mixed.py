"""A product of a bf16 and an fp32 matrix (mixed dtypes)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(32, 16, dtype=torch.bfloat16), torch.randn(16, 48)]


def get_init_inputs():
    return []
