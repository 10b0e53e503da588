"""Biased variance of each row (unbiased=False)."""
import torch
import torch.nn as nn

batch_size = 64
dim = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1}, {"batch_size": 127, "dim": 1000}, {"batch_size": 2, "dim": 65537}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x.var(dim=-1, unbiased=False)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
