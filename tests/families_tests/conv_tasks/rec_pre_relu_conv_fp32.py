"""A convolution of a computed input (a ReLU before it): the ReLU as a pointwise kernel of its
own, then the conv kernel on what it wrote (chains.before_conv)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3)

    def forward(self, x):
        return self.conv(torch.relu(x))


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return []
