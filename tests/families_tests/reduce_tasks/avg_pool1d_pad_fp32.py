"""AvgPool1d(4, stride 1, padding 2): windows counting the padding."""

import torch
import torch.nn as nn

batch_size = 16
channels = 32
length = 1000

VERIFY_SHAPES = [
    {"batch_size": 1, "channels": 1, "length": 2},
    {"batch_size": 3, "channels": 5, "length": 4099},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(4, stride=1, padding=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
