"""Conv3d 3x3x3, padding 1, 256 -> 256 channels over an 8 x 8 x 8 volume (few output tiles, a long K), 4 x 8 x 8 x 8, bf16."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 256
out_channels = 256
depth = 8
height = 8
width = 8
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 3, 'height': 5, 'width': 7}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
