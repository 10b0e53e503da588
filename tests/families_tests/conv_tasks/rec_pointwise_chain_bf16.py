"""A 1x1 convolution (a GEMM over pixels) with its bias, a per-channel (C, 1, 1) scale, a
residual input and ReLU, bf16: the chain runs in the pointwise GEMM's epilogue. Channel
counts off the tiles (96 in, 160 out); one hidden shape's planes are 35 pixels (rows that
TMA cannot load: the implicit GEMM takes it)."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 96
out_channels = 160
height = 24
width = 40
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 5, 'width': 7},
                 {'batch_size': 3, 'height': 8, 'width': 16}]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, dtype=DTYPE)
        self.scale = nn.Parameter(torch.randn(out_channels, 1, 1, dtype=DTYPE))

    def forward(self, x: torch.Tensor, res: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) * self.scale + res)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE),
            torch.randn(batch_size, out_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels]
