"""A depthwise-separable convolution in bf16: a depthwise 3x3 (groups = channels, the direct
kernel), then a 1x1 pointwise conv to more channels (one GEMM) reading what it wrote."""
import torch
import torch.nn as nn

batch, channels, out_channels, size = 4, 32, 64, 29


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False,
                                   dtype=torch.bfloat16)
        self.pointwise = nn.Conv2d(channels, out_channels, 1, bias=False, dtype=torch.bfloat16)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


def get_inputs():
    return [torch.randn(batch, channels, size, size, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


VERIFY_SHAPES = [{"batch": 1, "size": 17}]
