"""Elementwise GELU (tanh approximation), bf16. PERFORMANCE.md tier A: (32768, 8192)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 8192}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 100003}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
