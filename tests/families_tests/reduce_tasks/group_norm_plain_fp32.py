"""F.group_norm with 4 groups and no affine parameters."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
channels = 32
length = 100
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "length": 1}, {"batch_size": 3, "length": 4099}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return F.group_norm(x, 4)


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
