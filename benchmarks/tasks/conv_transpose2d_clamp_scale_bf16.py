"""ConvTranspose2d 3x3, stride 2, padding 1, output_padding 1, minus a per-channel bias, clamp to [0, 1], times a scale, clamp, divide by the scale, 64 -> 64 channels, 16 x 32 x 32, bf16."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 64
height = 32
width = 32
kernel_size = 3
scaling_factor = 2.0
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, scaling_factor: float):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1, dtype=DTYPE)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, dtype=DTYPE) * 0.02)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x) - self.bias
        x = torch.clamp(x, min=0.0, max=1.0)
        x = x * self.scaling_factor
        x = torch.clamp(x, min=0.0, max=1.0)
        return x / self.scaling_factor


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scaling_factor]
