"""MaxPool2d(3, stride 5, padding 1, dilation 2, ceil mode) of a bf16 tensor after a shift:
gaps between the windows, a dilated window, the ceil-mode overhang (staged: the
thread-per-outputs kernel's lanes would read 80 bytes apart)."""

import torch
import torch.nn as nn

batch_size = 4
channels = 6
height = 61
width = 808

VERIFY_SHAPES = [
    {"batch_size": 1, "channels": 1, "height": 5, "width": 8},
    {"batch_size": 2, "channels": 3, "height": 33, "width": 2056},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=5, padding=1, dilation=2, ceil_mode=True)

    def forward(self, x):
        return self.pool(x - 0.25)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
