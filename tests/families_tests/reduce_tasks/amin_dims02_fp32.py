"""amin over dims 0 and 2 of (N, C, L): the row family over L, then the strided one over N."""
import torch
import torch.nn as nn

batch_size = 8
channels = 24
length = 300
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "length": 1}, {"batch_size": 33, "channels": 5, "length": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.amin(x, dim=(0, 2), keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
