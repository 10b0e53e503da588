"""Conv2d 3x3 over a 7 x 7 map, 512 -> 512 channels, then a per-channel scale, ReLU and a residual of the output's shape: relu(conv(x) * scale[c]) + residual, 32 x 7 x 7, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 512
out_channels = 512
height = 7
width = 7
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 5, 'width': 9}, {'batch_size': 3, 'height': 11, 'width': 6}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, bias=False, dtype=DTYPE)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1, dtype=DTYPE) + 0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) * self.scale) + residual


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE), torch.randn(batch_size, out_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
