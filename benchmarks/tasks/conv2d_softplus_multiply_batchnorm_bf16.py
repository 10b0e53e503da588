"""Conv2d 3x3, x * tanh(softplus(x)) spelled with torch.multiply, BatchNorm2d in training mode: the conv kernel with the activation fused and its BatchNorm tail; 16 -> 64 channels, 32 x 128 x 128, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 16
out_channels = 64
height = 128
width = 128
kernel_size = 3
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, dtype=DTYPE)
        self.bn = nn.BatchNorm2d(out_channels, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.multiply(torch.tanh(torch.nn.functional.softplus(x)), x)
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
