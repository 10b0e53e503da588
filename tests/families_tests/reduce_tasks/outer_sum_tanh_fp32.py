"""tanh(x + y) with x of shape (rows, 1) and y of shape (1, cols): a result larger than every operand (an outer broadcast), one pointwise kernel reading x expanded."""
import torch
import torch.nn as nn

rows = 96
cols = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 8}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.tanh(x + y)


def get_inputs():
    return [torch.randn(rows, 1, dtype=DTYPE), torch.randn(1, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
