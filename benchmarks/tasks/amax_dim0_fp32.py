"""Max over the first dim of a matrix (a column reduction), fp32, (16384, 16384) -> (16384,)."""
import torch
import torch.nn as nn

rows = 16384
cols = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1000}, {"rows": 127, "cols": 4097}, {"rows": 65537, "cols": 8}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
