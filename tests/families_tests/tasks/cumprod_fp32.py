"""Cumulative product of values near 1 (a prologue) along the last dim, fp32."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 30001}]
INPUT_DISTRIBUTIONS = ["randn", "small", "uniform", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(1.0 + 0.01 * x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
