"""Conv3d with an asymmetric kernel (3, 5, 5), stride (1, 2, 2), 16 -> 32 channels, 2 x 16 x 64 x 64, fp32."""
import torch
import torch.nn as nn

batch_size = 2
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
kernel_size = (3, 5, 5)
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 5, 'height': 9, 'width': 11}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=(1, 2, 2), padding=(1, 2, 2), dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
