"""F.conv2d with padding='same' (an even kernel: asymmetric), dilation 2, a bias argument and a
per-channel scale from a forward argument, fp16."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(32, 16, 4, 4, dtype=torch.float16))
        self.bias = nn.Parameter(torch.randn(32, dtype=torch.float16))

    def forward(self, x, s):
        return torch.sigmoid(F.conv2d(x, self.weight, self.bias, padding="same", dilation=2)) * s


def get_inputs():
    return [torch.randn(2, 16, 20, 21, dtype=torch.float16),
            torch.randn(1, 32, 1, 1, dtype=torch.float16)]


def get_init_inputs():
    return []
