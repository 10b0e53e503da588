"""A grouped Conv2d with 4 input and 2 output channels a group (6 groups), an asymmetric 3x5
kernel and padding (1, 2), plus a residual of the output's shape, bf16: several input channels
per output in the direct kernel, and a full epilogue operand."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(24, 12, (3, 5), padding=(1, 2), groups=6, dtype=torch.bfloat16)

    def forward(self, x, res):
        return self.conv(x) + res


def get_inputs():
    return [torch.randn(4, 24, 33, 48, dtype=torch.bfloat16),
            torch.randn(4, 12, 33, 48, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
