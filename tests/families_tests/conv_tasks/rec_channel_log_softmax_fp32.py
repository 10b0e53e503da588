"""Conv2d with 48 output channels, a log-softmax over the channels, then a scale: the
log-softmax in the ChannelKernel tail holding a pixel's 48 channels in registers (one read of
the conv's output, ``cached``), the scale fused into its stores."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 48, 3)

    def forward(self, x):
        return torch.log_softmax(self.conv(x), dim=1) * 2.0


def get_inputs():
    return [torch.randn(8, 16, 34, 34)]


def get_init_inputs():
    return []
