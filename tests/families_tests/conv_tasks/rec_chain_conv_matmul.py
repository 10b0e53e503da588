"""A convolution and a matrix product in one forward: the conv kernel, then the GEMM family's on what it wrote."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.w = nn.Parameter(torch.randn(12, 12))

    def forward(self, x):
        return self.conv(x) @ self.w


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return []
