"""Argmin over the middle dim of (B, R, C), bf16, (32, 4096, 4096) -> (32, 4096) int64."""
import torch
import torch.nn as nn

batch_size = 32
dim1 = 4096
dim2 = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 127, "dim2": 1000}, {"batch_size": 3, "dim1": 1, "dim2": 4104},
                 {"batch_size": 2, "dim1": 5003, "dim2": 24}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
