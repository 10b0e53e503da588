"""A matrix times a Python number passed to forward (read at run time)."""
import torch
import torch.nn as nn

M = 64
N = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"M": 1, "N": 8}, {"M": 127, "N": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, s):
        return A * s


def get_inputs():
    return [torch.randn(M, N, dtype=DTYPE), 3.14]


def get_init_inputs():
    return []
