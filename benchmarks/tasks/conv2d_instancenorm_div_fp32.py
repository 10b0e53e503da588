"""Conv2d 3x3, InstanceNorm2d (per image and channel over H x W), divided by a constant: two kernels, 32 -> 64 channels, 32 x 64 x 64, fp32."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 32
out_channels = 64
height = 64
width = 64
kernel_size = 3
divide_by = 2.0
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, divide_by: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, dtype=DTYPE)
        self.instance_norm = nn.InstanceNorm2d(out_channels, dtype=DTYPE)
        self.divide_by = divide_by

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.instance_norm(self.conv(x))
        return x / self.divide_by


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divide_by]
