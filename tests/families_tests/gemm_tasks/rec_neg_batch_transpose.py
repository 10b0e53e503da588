"""bmm with a batch/row transpose of an operand."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a.transpose(0, 1), b)


def get_inputs():
    return [torch.randn(32, 2, 16), torch.randn(2, 16, 48)]


def get_init_inputs():
    return []
