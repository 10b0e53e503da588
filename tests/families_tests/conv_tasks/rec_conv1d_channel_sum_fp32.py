"""Conv1d, then the sum over the channels (keepdim) and a sigmoid: the sum is taken in the conv
kernel's epilogue (``fuse_channel``), the sigmoid after it on each pixel's one value."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(24, 64, 5, padding=2)

    def forward(self, x):
        return torch.sigmoid(torch.sum(self.conv(x), dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(16, 24, 1000)]


def get_init_inputs():
    return []
