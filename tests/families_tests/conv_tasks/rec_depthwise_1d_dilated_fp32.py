"""A depthwise Conv1d with dilation 3 and padding 6 (a dilated temporal filter), no bias, fp32:
the direct kernel's span reads along the only spatial dim, positions three apart."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(64, 64, 5, dilation=3, padding=6, groups=64, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 64, 1000)]


def get_init_inputs():
    return []
