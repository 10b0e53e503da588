"""Conv2d, a GroupNorm, a clamp, a per-channel multiplier, then the max over the channels
(KernelBench L2 79's kind): by default the GroupNorm's kernel writes only each (image,
channel)'s scale and offset, and the ChannelKernel normalises, clamps and scales each value it
reads (``fuse_norm``)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 48, 3)
        self.norm = nn.GroupNorm(6, 48)
        self.multiplier = nn.Parameter(torch.randn(48, 1, 1))

    def forward(self, x):
        x = torch.clamp(self.norm(self.conv(x)), -1.5, 1.5) * self.multiplier
        return torch.max(x, dim=1)[0]


def get_inputs():
    return [torch.randn(8, 16, 34, 34)]


def get_init_inputs():
    return []
