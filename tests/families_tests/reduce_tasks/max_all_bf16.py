"""torch.max(x) without a dim: the max of every element."""
import torch
import torch.nn as nn

rows = 64
cols = 512
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.max(x) * 2.0


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
