"""x / x.sum(1) of a square matrix: the sums of rows, not kept as a column, broadcast along the last dim (element (i, j) is divided by the sum of row j), as torch defines it: a row sum, then a pointwise kernel reading the sums per column."""
import torch
import torch.nn as nn

n = 1024
DTYPE = torch.float32

VERIFY_SHAPES = [{"n": 1}, {"n": 129}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.sum(1)


def get_inputs():
    return [torch.rand(n, n, dtype=DTYPE) + 0.5]


def get_init_inputs():
    return []
