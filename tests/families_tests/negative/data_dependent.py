"""Data-dependent control flow: torch.fx cannot trace it."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return torch.softmax(x, dim=-1)
        return x


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
