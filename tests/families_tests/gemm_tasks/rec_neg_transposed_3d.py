"""A transposed 3-d A times a 2-d B: the leading dims cannot fold into M."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.matmul(x.transpose(-1, -2), w)


def get_inputs():
    return [torch.randn(2, 16, 32), torch.randn(16, 48)]


def get_init_inputs():
    return []
