"""Conv2d with 96 output channels (not a multiple of the 128-channel tile), a per-channel scale,
the mean over the channels without keepdim, then ReLU: the mean is taken in the conv kernel's
epilogue (``fuse_channel``), the scale applied to each element before it."""
import torch
import torch.nn as nn

DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 96, 3, padding=1, dtype=DTYPE)
        self.scale = nn.Parameter(torch.rand(96, 1, 1, dtype=DTYPE) + 0.5)

    def forward(self, x):
        x = torch.mean(self.conv(x) * self.scale, dim=1)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 32, 40, 40, dtype=DTYPE)]


def get_init_inputs():
    return []
