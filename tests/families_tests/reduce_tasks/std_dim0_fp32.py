"""Standard deviation over the first dim of a 3-d tensor (strided, B = 1)."""
import torch
import torch.nn as nn

dim0 = 100
dim1 = 8
dim2 = 96
DTYPE = torch.float32

VERIFY_SHAPES = [{"dim0": 2, "dim1": 1, "dim2": 5}, {"dim0": 1000, "dim1": 3, "dim2": 33}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.std(x, dim=0)


def get_inputs():
    return [torch.randn(dim0, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
