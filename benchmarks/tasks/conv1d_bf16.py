"""Conv1d, kernel 5, padding 2, 128 -> 256 channels, 32 x 4096, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 256
length = 4096
kernel_size = 5
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'length': 127}, {'batch_size': 3, 'length': 1001}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=2, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
