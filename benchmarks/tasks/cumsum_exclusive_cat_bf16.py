"""Exclusive cumulative sum in KernelBench's current spelling, bf16, (32, 512, 4096).

Level 1, problem 92, since its pull request 109: the cumsum of all but the last value along
the last dim, with a zero put in front (``torch.cat``)."""
import torch
import torch.nn as nn

batch_size = 32
seq = 512
n = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "seq": 1, "n": 1}, {"batch_size": 3, "seq": 7, "n": 4099}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        head = torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1),
                            dim=self.dim)
        zero = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
        return torch.cat((zero, head), dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, seq, n, dtype=DTYPE)]


def get_init_inputs():
    return [2]
