"""SELU, CELU, softsign, log-sigmoid, tanhshrink, hard/soft shrink, threshold, where, a bool
mask argument and masked_fill in one pointwise chain."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 64
cols = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def forward(self, x, mask):
        y = torch.selu(x) + F.celu(x, 0.5) + F.softsign(x) + F.logsigmoid(x) + F.tanhshrink(x)
        y = y + F.hardshrink(x, 0.3) + F.softshrink(x, 0.2) + F.threshold(x, 0.1, -1.0)
        y = torch.where(x > 0, y, 2 * y) * mask
        return y.masked_fill(x < -2, 0.0)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE), torch.rand(rows, cols) > 0.5]


def get_init_inputs():
    return []
