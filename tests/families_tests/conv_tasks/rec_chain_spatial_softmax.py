"""A softmax over a spatial dim after a conv (the conv tails take the channels only): the conv kernel, then the strided family's logsumexp over that dim mapped back, exp(x - lse)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3)

    def forward(self, x):
        return torch.softmax(self.conv(x), dim=2)


def get_inputs():
    return [torch.randn(2, 16, 18, 18)]


def get_init_inputs():
    return []
