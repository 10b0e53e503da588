"""Sum over the middle dim of (B, R, C) with keepdim, fp32, (32, 4096, 2048) -> (32, 1, 2048)."""
import torch
import torch.nn as nn

batch_size = 32
dim1 = 4096
dim2 = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 127, "dim2": 1000}, {"batch_size": 3, "dim1": 1, "dim2": 4097},
                 {"batch_size": 2, "dim1": 8191, "dim2": 8},
                 {"batch_size": 2, "dim1": 64, "dim2": 4095}]  # odd C: 32-bit loads


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return [1]
