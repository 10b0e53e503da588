"""Mean of every element of a matrix (a 0-d result), fp32, (16384, 16384)."""
import torch
import torch.nn as nn

rows = 16384
cols = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 1000}, {"rows": 1, "cols": 1000003},
                 {"rows": 3, "cols": 4097}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean()


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
