"""Sum reduction over the last dim, bf16, (32768, 8192) -> (32768,)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 8192}, {"batch_size": 127, "dim": 1000}, {"batch_size": 16, "dim": 262144}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
