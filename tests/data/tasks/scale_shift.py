"""Test task: y = 2x + 1, fp32, small enough for quick harness tests."""
import torch
import torch.nn as nn

batch_size = 2048
dim = 1024

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1024}, {"batch_size": 127, "dim": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
