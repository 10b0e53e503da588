"""An average pooling before a transposed 3-D convolution, then a clamp and a per-channel
scale: the pool family's kernel, then the conv kernel with the clamp and the scale fused into
its epilogue, reading what the pool wrote."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(2)
        self.conv = nn.ConvTranspose3d(8, 16, 3, stride=2, padding=1, output_padding=1)
        self.scale = nn.Parameter(torch.rand(1, 16, 1, 1, 1) + 0.5)

    def forward(self, x):
        x = self.conv(self.pool(x))
        return torch.clamp(x, -0.5, 0.5) * self.scale


def get_inputs():
    return [torch.randn(2, 8, 10, 12, 14)]


def get_init_inputs():
    return []
