"""A sum over M of a matmul: the GEMM, then the strided family's column sum."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.sum(a @ b, dim=0)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(16, 48)]


def get_init_inputs():
    return []
