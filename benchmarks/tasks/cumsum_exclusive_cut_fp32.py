"""Exclusive cumulative sum in KernelBench's original spelling, fp32, (16384, 16384).

Level 1, problem 92, before its pull request 109: a zero column put in front of x, then
``[:-1]``, which cuts the last *row*, then the cumsum along the rows. The result is one row
shorter and one column wider than x: out[i, 0] = 0, out[i, j] = x[i, 0] + ... + x[i, j - 1]
for j = 1 .. n."""
import torch
import torch.nn as nn

batch_size = 16384
n = 16384
DTYPE = torch.float32

# one row (an empty result), a prime row count with a row length no vector divides, one column
VERIFY_SHAPES = [{"batch_size": 1, "n": 1000}, {"batch_size": 127, "n": 4097},
                 {"batch_size": 5, "n": 1}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        shifted = torch.cat((zero, x), dim=self.dim)[:-1]
        return torch.cumsum(shifted, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, n, dtype=DTYPE)]


def get_init_inputs():
    return [1]
