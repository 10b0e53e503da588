"""torch.logsumexp of every element of a 3-D fp32 tensor (two deterministic passes: each
piece's logsumexp, then theirs)."""
import torch
import torch.nn as nn

batch = 16
rows = 256
cols = 1024
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch": 1, "rows": 1, "cols": 3}, {"batch": 3, "rows": 127, "cols": 1001}]


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=(0, 1, 2))


def get_inputs():
    return [torch.randn(batch, rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
