"""Conv3d 3x3x3, softmax over the channels, MaxPool3d(2): three kernels (the softmax one thread per voxel over the channels), 16 -> 32 channels, 8 x 16 x 32 x 32, bf16."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 6, 'height': 9, 'width': 11}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)
        self.pool = nn.MaxPool3d(kernel_size=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(self.conv(x), dim=1)
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
