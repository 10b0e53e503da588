"""MinGPT's tanh GELU written out in pointwise ops (KernelBench level 1 #88 style), fp32."""
import math

import torch
import torch.nn as nn

batch_size = 4096
dim = 4096
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 4096}, {"batch_size": 127, "dim": 1000}, {"batch_size": 2, "dim": 7}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
