"""The argmax over N of a matmul: the GEMM, then the row family's argmax."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.argmax(a @ b, dim=-1)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16, 48)]


def get_init_inputs():
    return []
