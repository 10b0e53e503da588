"""F.avg_pool3d(3, stride 2, padding 1, count_include_pad=False, ceil mode), bf16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
channels = 8
depth = 16
height = 32
width = 30

VERIFY_SHAPES = [
    {"batch_size": 1, "channels": 1, "depth": 3, "height": 3, "width": 3},
    {"batch_size": 2, "channels": 3, "depth": 5, "height": 17, "width": 65},
]


class Model(nn.Module):
    def forward(self, x):
        return F.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
