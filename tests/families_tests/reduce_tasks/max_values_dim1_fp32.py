"""torch.max(x, dim=1) values over the middle dim of a 3-d tensor."""
import torch
import torch.nn as nn

batch_size = 8
dim1 = 64
dim2 = 200
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim1": 1, "dim2": 4}, {"batch_size": 3, "dim1": 127, "dim2": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.max(x, dim=1)[0]


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=DTYPE)]


def get_init_inputs():
    return []
