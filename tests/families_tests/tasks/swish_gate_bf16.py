"""Pointwise chain over two full inputs and a bias: x * sigmoid(x) * y + bias, bf16."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 4096}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 1001}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim, dtype=DTYPE))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * y + self.bias


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE), torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim]
