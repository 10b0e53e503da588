"""A.mT @ B.t() in fp32: both operands transposed."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A.mT @ B.t()


def get_inputs():
    return [torch.randn(96, 64), torch.randn(80, 96)]


def get_init_inputs():
    return []
