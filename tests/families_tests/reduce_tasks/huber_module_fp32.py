"""nn.HuberLoss(delta=2) averaged over every element."""
import torch
import torch.nn as nn

rows = 64
cols = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.HuberLoss(delta=2.0)

    def forward(self, p, t):
        return self.loss(p, t)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE), torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
