"""Mean over the middle dim of (B, R, C), bf16, (64, 2048, 4096) -> (64, 4096)."""
import torch
import torch.nn as nn

batch_size = 64
dim1 = 2048
dim2 = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 127, "dim2": 1000}, {"batch_size": 5, "dim1": 3, "dim2": 4104},
                 {"batch_size": 2, "dim1": 10007, "dim2": 16}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
