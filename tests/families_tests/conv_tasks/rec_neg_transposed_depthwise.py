"""A transposed depthwise convolution: thin groups run on the direct kernel, forward only."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(32, 32, 3, stride=2, groups=32)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 32, 12, 12)]


def get_init_inputs():
    return []
