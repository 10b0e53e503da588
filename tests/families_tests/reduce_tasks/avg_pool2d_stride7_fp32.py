"""AvgPool2d(7, stride 7, padding 2) (count_include_pad) then a scale: windows at a wide stride
(the thread-per-outputs pool kernel's lanes would read 112 bytes apart; staged)."""

import torch
import torch.nn as nn

batch_size = 4
channels = 8
height = 130
width = 1004

VERIFY_SHAPES = [
    {"batch_size": 1, "channels": 1, "height": 5, "width": 8},
    {"batch_size": 2, "channels": 3, "height": 131, "width": 4092},
    {"batch_size": 1, "channels": 2, "height": 17, "width": 1001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=7, stride=7, padding=2)

    def forward(self, x):
        return self.pool(x) * 1.5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
