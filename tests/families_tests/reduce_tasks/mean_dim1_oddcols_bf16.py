"""A scaled mean over dim 1 of a bf16 (B, R, C) tensor with an odd C, plus a per-column bias:
folded 8 rows at a time (bf16's 128-bit accesses hold 8 values), the scale in the first pass,
the bias in the second."""
import torch
import torch.nn as nn

batch_size = 8
rows = 512
cols = 1535
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 5, "rows": 509}, {"batch_size": 2, "cols": 1536}]


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols, dtype=DTYPE))

    def forward(self, x):
        return (x * 2.0).mean(dim=1) + self.bias


def get_inputs():
    return [torch.randn(batch_size, rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return [cols]
