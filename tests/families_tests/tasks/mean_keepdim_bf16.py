"""Row mean with keepdim, then a scalar epilogue, bf16."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 6, "dim": 100001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-1, keepdim=True) * 2.0 - 1.0


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
