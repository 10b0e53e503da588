"""A max pooling with padding after a conv (the pooling tail takes windows inside the tensor): the conv kernel, then the pool family's kernel, which pads."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(self.conv(x))


def get_inputs():
    return [torch.randn(2, 16, 18, 18)]


def get_init_inputs():
    return []
