"""Reverse cumulative sum (flip, cumsum, flip) along the last dim, fp32."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 5, "dim": 20001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(-1), dim=-1).flip(-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
