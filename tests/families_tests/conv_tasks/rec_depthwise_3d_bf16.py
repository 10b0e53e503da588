"""A depthwise Conv3d, stride (1, 2, 2), padding 1, then SiLU, bf16, on an odd-sized volume:
the direct kernel's depth taps and a strided span."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(32, 32, 3, stride=(1, 2, 2), padding=1, groups=32,
                              dtype=torch.bfloat16)

    def forward(self, x):
        return torch.nn.functional.silu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 32, 7, 30, 31, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
