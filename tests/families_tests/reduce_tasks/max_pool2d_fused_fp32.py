"""MaxPool2d(3, stride 2, padding 1, dilation 2, ceil mode) between a scale and a ReLU."""

import torch
import torch.nn as nn

batch_size = 8
channels = 16
height = 64
width = 60

VERIFY_SHAPES = [
    {"batch_size": 1, "channels": 1, "height": 5, "width": 5},
    {"batch_size": 2, "channels": 3, "height": 33, "width": 101},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)

    def forward(self, x):
        return torch.relu(self.pool(x * 2.0))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
