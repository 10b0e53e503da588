"""Conv1d, kernel 7, stride 3, dilation 2, 64 -> 128 channels, 16 x 8192, fp32."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
length = 8192
kernel_size = 7
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'length': 127}, {'batch_size': 3, 'length': 1001}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=3, dilation=2, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
