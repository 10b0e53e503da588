"""ConvTranspose3d 3x3x3, stride 2, padding 1, output_padding 1, 64 -> 32 channels, 4 x 8 x 16 x 16, bf16."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 64
out_channels = 32
depth = 8
height = 16
width = 16
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 5, 'height': 9, 'width': 11}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
