"""A sum over every element (dim=None): two deterministic passes."""
import torch
import torch.nn as nn

rows = 64
cols = 128
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 1000}, {"rows": 3, "cols": 100003}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.sum(x)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
