"""torch.addmm(bias, x, W): the bias is the first epilogue op."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(64, dtype=torch.bfloat16))

    def forward(self, x, w):
        return torch.addmm(self.bias, x, w)


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16), torch.randn(128, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
