"""A.T @ B in fp32: A stored [K, M] (a_major m)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(96, 64), torch.randn(96, 80)]


def get_init_inputs():
    return []
