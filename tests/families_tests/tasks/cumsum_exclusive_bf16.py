"""Exclusive cumulative sum (cumsum(x) - x) along the last dim, bf16."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 9999}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1) - x


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
