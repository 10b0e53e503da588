"""A convolution of an unbatched (C, L) input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(16, 32, 3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(16, 100)]


def get_init_inputs():
    return []
