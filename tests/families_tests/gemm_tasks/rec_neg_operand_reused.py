"""A transposed operand also used after the product."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        bt = b.t()
        return a @ bt + bt


def get_inputs():
    return [torch.randn(32, 32), torch.randn(32, 32)]


def get_init_inputs():
    return []
