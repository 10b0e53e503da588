"""Conv2d, a GroupNorm, a HardSwish, then the mean over each channel's plane (KernelBench L2
27's kind): by default the GroupNorm's kernel writes only each (image, channel)'s scale and
offset, and the PlaneReduceKernel normalises and applies the HardSwish to each value it reads
(``fuse_norm``)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 32, 3)
        self.norm = nn.GroupNorm(4, 32)

    def forward(self, x):
        return torch.mean(nn.functional.hardswish(self.norm(self.conv(x))), dim=[2, 3])


def get_inputs():
    return [torch.randn(8, 8, 34, 34)]


def get_init_inputs():
    return []
