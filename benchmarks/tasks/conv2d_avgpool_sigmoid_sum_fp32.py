"""Conv2d 3x3, AvgPool2d(2), sigmoid, then a sum over channels and both spatial dims (one value per sample): the conv kernel with its bias, pooling tail and sigmoid, then a row sum of what it wrote, two kernels; 8 -> 64 channels, 64 x 128 x 128, fp32."""
import torch
import torch.nn as nn

batch_size = 64
in_channels = 8
out_channels = 64
height = 128
width = 128
kernel_size = 3
pool_kernel_size = 2

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.avg_pool(x)
        x = torch.sigmoid(x)
        return torch.sum(x, dim=[1, 2, 3])


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]
