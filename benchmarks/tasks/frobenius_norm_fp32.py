"""x divided by its Frobenius norm (every element), fp32, (16, 64, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 256
dim2 = 256
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "features": 1, "dim1": 1, "dim2": 3},
                 {"batch_size": 2, "features": 3, "dim1": 127, "dim2": 1000},
                 {"batch_size": 1, "features": 1, "dim1": 1, "dim2": 1000003}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm = torch.norm(x, p="fro")
        return x / norm


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
