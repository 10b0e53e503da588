"""A transposed conv whose dilated kernel is wider than the im2col descriptor's corner field,
(9 - 1) * 3 = 24 > 16: the direct kernel computes forward convs only, so it is refused."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose1d(16, 32, 9, dilation=3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 16, 200)]


def get_init_inputs():
    return []
