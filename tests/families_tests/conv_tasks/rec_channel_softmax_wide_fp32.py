"""Conv2d with 96 output channels, a softmax over the channels, then a per-channel bias: more
channels than the ChannelKernel holds in registers (64), so its softmax takes the online pass
(the max and the sum of exps together, one read) and the write pass (a second read), the bias
fused into its stores."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 96, 3)
        self.bias = nn.Parameter(torch.randn(1, 96, 1, 1) * 0.1)

    def forward(self, x):
        return torch.softmax(self.conv(x), dim=1) + self.bias


def get_inputs():
    return [torch.randn(8, 16, 34, 34)]


def get_init_inputs():
    return []
