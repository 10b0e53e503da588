"""torch.min(x, torch.tensor(self.constant)): an elementwise minimum with a number."""
import torch
import torch.nn as nn

rows = 64
cols = 1000
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 8}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def __init__(self, constant: float = 0.25):
        super().__init__()
        self.constant = constant

    def forward(self, x):
        return torch.min(x, torch.tensor(self.constant)) - self.constant


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return [0.25]
