"""Two tail ops reading the same tensor (a branch): more than the conv tails chain; a chain of kernels, the conv with its pooling tail writing what both branches read."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3)

    def forward(self, x):
        y = F.max_pool2d(self.conv(x), 2)
        return F.adaptive_avg_pool2d(y, 1) + torch.mean(y, dim=[2, 3], keepdim=True)


def get_inputs():
    return [torch.randn(2, 16, 18, 18)]


def get_init_inputs():
    return []
