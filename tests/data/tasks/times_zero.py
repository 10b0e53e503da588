"""Test task: y = x * 0.0, fp32. Its output is all zeros (signed), whatever the input: a
constant output, as after ``min(x, 0)`` then ``clamp(0, 1)`` (KernelBench level 2, 83). An
honest kernel for it must not look like a decoy to the ghost call."""
import torch
import torch.nn as nn

batch_size = 2048
dim = 1024

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1024}, {"batch_size": 127, "dim": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
