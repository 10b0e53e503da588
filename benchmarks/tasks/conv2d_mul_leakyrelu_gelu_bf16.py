"""Conv2d 3x3, times a learnable per-channel multiplier (C, 1, 1), LeakyReLU, GELU, 64 -> 128 channels, 32 x 64 x 64, bf16."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)
        self.multiplier = nn.Parameter(torch.randn(out_channels, 1, 1, dtype=DTYPE))
        self.leaky_relu = nn.LeakyReLU(negative_slope=0.01)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x) * self.multiplier
        x = self.leaky_relu(x)
        return F.gelu(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
