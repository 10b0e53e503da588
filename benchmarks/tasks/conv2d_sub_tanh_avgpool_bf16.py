"""Conv2d 3x3, subtract, tanh, subtract, AvgPool2d(2): the pointwise ops fused into the conv's epilogue, the pooling a second kernel, 64 -> 128 channels, 32 x 64 x 64, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
subtract1_value = 0.5
subtract2_value = 0.2
kernel_size_pool = 2
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, subtract1_value: float, subtract2_value: float, kernel_size_pool: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, dtype=DTYPE)
        self.subtract1_value = subtract1_value
        self.subtract2_value = subtract2_value
        self.avgpool = nn.AvgPool2d(kernel_size_pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.conv(x) - self.subtract1_value)
        return self.avgpool(x - self.subtract2_value)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, subtract1_value, subtract2_value, kernel_size_pool]
