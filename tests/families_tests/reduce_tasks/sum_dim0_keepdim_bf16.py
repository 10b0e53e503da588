"""Sum over the first dim of a matrix, keepdim (a [R, K] strided reduction)."""
import torch
import torch.nn as nn

rows = 96
cols = 640
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"rows": 1, "cols": 8}, {"rows": 1001, "cols": 3}, {"rows": 5, "cols": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x.sum(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
