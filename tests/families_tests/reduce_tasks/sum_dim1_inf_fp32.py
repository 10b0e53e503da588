"""A sum over dim 1 of (B, R, C) of values past 3 replaced by +inf, fp32 (the strided
family's compensated sum): most columns inf, some finite."""
import torch
import torch.nn as nn

batch = 4
rows = 2048
cols = 96
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch": 1, "rows": 3, "cols": 5}, {"batch": 2, "rows": 1000, "cols": 33}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 3.0, float("inf"), x).sum(dim=1)


def get_inputs():
    return [torch.randn(batch, rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
