"""Sum over the first two dims of a 3-d tensor (merged into one reduced run)."""
import torch
import torch.nn as nn

batch_size = 8
dim1 = 32
dim2 = 512
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 1, "dim2": 8}, {"batch_size": 3, "dim1": 101, "dim2": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.sum(x, dim=(0, 1))


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
