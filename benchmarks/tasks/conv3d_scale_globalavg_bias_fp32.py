"""Conv3d 3x3x3, times a scale, global average pooling (AdaptiveAvgPool3d(1)), plus a per-channel bias (C, 1, 1, 1), 16 -> 32 channels, 8 x 16 x 32 x 32, fp32."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 3
scale = 0.5
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 5, 'height': 9, 'width': 11}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, scale: float):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)
        self.scale = scale
        self.avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x) * self.scale
        x = self.avg_pool(x)
        return x + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
