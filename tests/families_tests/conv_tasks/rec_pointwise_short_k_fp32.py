"""A 1x1 conv of 64 -> 128 channels in fp32 with no declared input distributions (every one
the evaluator has, the 1e3-scaled "large" among them): a 3xTF32 implicit GEMM of six k tiles,
which promotes its accumulator after every k tile (KernelBench L1 86's second conv)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pointwise = nn.Conv2d(64, 128, 1, bias=False)

    def forward(self, x):
        return self.pointwise(x)


def get_inputs():
    return [torch.randn(2, 64, 40, 40)]


def get_init_inputs():
    return []
