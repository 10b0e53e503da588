"""An operand per pixel ((1, 1, H, W)): neither full, per channel nor a single value."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)
        self.mask = nn.Parameter(torch.randn(1, 1, 12, 12))

    def forward(self, x):
        return self.conv(x) * self.mask


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return []
