"""Exclusive cumulative sum along the rows, spelled as the cumsum of the input shifted right by
one with a zero in front (torch.cat + narrow, as KernelBench's level 1 writes it), fp32,
(16384, 16384)."""
import torch
import torch.nn as nn

batch_size = 16384
n = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "n": 1000}, {"batch_size": 127, "n": 4097}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zero = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        shifted = torch.cat((zero, x), dim=self.dim).narrow(self.dim, 0, x.size(self.dim))
        return torch.cumsum(shifted, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, n, dtype=DTYPE)]


def get_init_inputs():
    return [1]
