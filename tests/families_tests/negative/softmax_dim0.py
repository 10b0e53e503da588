"""Softmax over dim 0: not the last dim."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=0)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
