"""Conv2d 3x3, padding 1, 512 -> 512 channels over a 7 x 7 map (a CNN's last stage: few output tiles, a long K), 16 x 7 x 7, fp32 (tolerance 1e-4)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 512
out_channels = 512
height = 7
width = 7
kernel_size = 3
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'height': 5, 'width': 9}, {'batch_size': 3, 'height': 11, 'width': 6}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
