"""A strided, dilated transposed conv of 4 groups of 8 input and 16 output channels (thin
groups: the direct kernel computes forward convs only), an asymmetric kernel and stride, no
bias: one implicit GEMM a group and output phase, each group's channels padded to the k tile."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(32, 64, (3, 5), stride=(2, 3), padding=(1, 2),
                                       dilation=(2, 1), groups=4, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 32, 20, 28)]


def get_init_inputs():
    return []
