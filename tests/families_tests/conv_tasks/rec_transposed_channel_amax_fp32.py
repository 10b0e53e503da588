"""A strided ConvTranspose2d (one GEMM per output phase) times a full-size second input, the
maximum over the channels (keepdim), then a scalar offset: the maximum is taken in each phase's
epilogue (``fuse_channel``), the product with ``y`` read at each element's place first."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(16, 40, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x, y):
        x = torch.amax(self.conv(x) * y, dim=1, keepdim=True)
        return x - 0.25


def get_inputs():
    return [torch.randn(4, 16, 20, 24), torch.randn(4, 40, 40, 48)]


def get_init_inputs():
    return []
