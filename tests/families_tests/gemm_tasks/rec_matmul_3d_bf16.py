"""torch.matmul of two 3-d tensors (same batch): a batched product."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b) + 1.0


def get_inputs():
    return [torch.randn(3, 32, 16, dtype=torch.bfloat16), torch.randn(3, 16, 48, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
