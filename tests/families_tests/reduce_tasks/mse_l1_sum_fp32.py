"""F.mse_loss with reduction "sum" (one loss; l1 with "none" is pointwise)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 64
cols = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def forward(self, p, t):
        return F.mse_loss(F.l1_loss(p, t, reduction="none"), t, reduction="sum")


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE), torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
