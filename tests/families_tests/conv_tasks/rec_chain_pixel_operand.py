"""A per-pixel operand (1, 1, H, W) after a conv: the conv kernel, then a pointwise kernel reading the operand expanded (the conv epilogue broadcasts per-channel operands only)."""
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
