"""torch.prod over the middle dim of (B, R, C) (strided), values near 1."""
import torch
import torch.nn as nn

batch_size = 8
dim1 = 64
dim2 = 300
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 1, "dim2": 5}, {"batch_size": 3, "dim1": 127, "dim2": 1000}]


class Model(nn.Module):
    def forward(self, x):
        return torch.prod(1.0 + 0.01 * x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
