"""A 2-d A times a 3-d B: B's batch dim broadcasts A."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.matmul(x, w)


def get_inputs():
    return [torch.randn(32, 16), torch.randn(2, 16, 48)]


def get_init_inputs():
    return []
