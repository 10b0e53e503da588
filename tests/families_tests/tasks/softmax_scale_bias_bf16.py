"""Fused prologue: softmax(x * scale + bias) over the last dim, bf16."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 5, "dim": 1001}, {"batch_size": 3, "dim": 70000}]


class Model(nn.Module):
    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(dim, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * self.scale + self.bias, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim, 0.125]
