"""Softmax over very long rows, bf16, (16384, 131072): 8.6 GB moved; QuACK reaches 4.2 TB/s."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 131072
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 131072}, {"batch_size": 127, "dim": 100000}, {"batch_size": 8, "dim": 262144}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
