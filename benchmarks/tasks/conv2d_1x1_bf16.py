"""Conv2d 1x1 (a pointwise convolution: a GEMM over pixels), 256 -> 512 channels, 32 x 28 x 28, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 256
out_channels = 512
height = 28
width = 28
kernel_size = 1
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
