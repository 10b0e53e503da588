"""Conv1d, kernel 3, padding 1, then Mish twice, 64 -> 128 channels, 32 x 2048, fp32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
length = 2048
kernel_size = 3
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'length': 127}, {'batch_size': 3, 'length': 1001}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.mish(self.conv(x))
        return F.mish(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
