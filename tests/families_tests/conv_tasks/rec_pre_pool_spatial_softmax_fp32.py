"""A pooling, a transposed 3-D convolution with a clamp, then a softmax over each channel's
spatial positions (a view merging them, the softmax, a view back) and a per-channel scale:
the pool kernel, the conv kernel with the clamp in its epilogue, and one row kernel over the
last 3 dims with the scale in its epilogue."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(2)
        self.conv = nn.ConvTranspose3d(8, 12, 3, stride=2, padding=1, output_padding=1)
        self.scale = nn.Parameter(torch.rand(1, 12, 1, 1, 1) + 0.5)

    def forward(self, x):
        x = torch.clamp(self.conv(self.pool(x)), -1.0, 1.0)
        b, c, d, h, w = x.shape
        x = torch.softmax(x.view(b, c, -1), dim=2)
        return x.view(b, c, d, h, w) * self.scale


def get_inputs():
    return [torch.randn(3, 8, 8, 10, 14)]


def get_init_inputs():
    return []
