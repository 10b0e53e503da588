"""Pointwise chain: GELU(x) * scale + bias (bias broadcast over rows), fp32, (32768, 8192)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 8192
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 8192}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 100003}]


class Model(nn.Module):
    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(dim, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x) * self.scale + self.bias


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim, 1.702]
