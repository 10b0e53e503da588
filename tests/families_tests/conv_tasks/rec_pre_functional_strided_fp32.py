"""Two functional convolutions in a row with different geometry (padding 1, then stride 2): no
module holds either's stride or padding, so each conv stage passes its own spec to its launch."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(24, 16, 3, 3) * 0.1)
        self.w2 = nn.Parameter(torch.randn(32, 24, 3, 3) * 0.1)

    def forward(self, x):
        return F.conv2d(F.conv2d(x, self.w1, padding=1), self.w2, stride=2)


def get_inputs():
    return [torch.randn(2, 16, 21, 19)]


def get_init_inputs():
    return []
