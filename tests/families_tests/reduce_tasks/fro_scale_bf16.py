"""x / ||x||_F times a parameter (an all-elements statistic mapped back)."""
import torch
import torch.nn as nn

rows = 64
cols = 700
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.randn(cols, dtype=DTYPE))

    def forward(self, x):
        return x / torch.linalg.vector_norm(x) * self.gain


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
