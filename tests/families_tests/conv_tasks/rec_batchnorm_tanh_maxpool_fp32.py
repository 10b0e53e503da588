"""Conv2d, a BatchNorm with batch statistics, a tanh, then a 2x2 max pool (KernelBench L2 11's
kind): by default the BatchNorm's kernels write only each channel's scale and offset, and
the PoolKernel normalises and takes the tanh of each value it reads (``fuse_norm``)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3)
        self.bn = nn.BatchNorm2d(32)

    def forward(self, x):
        return nn.functional.max_pool2d(torch.tanh(self.bn(self.conv(x))), 2)


def get_inputs():
    return [torch.randn(8, 16, 32, 32)]


def get_init_inputs():
    return []
