"""A sum over dims in three separate runs (0, 2, 4 of a 5-d tensor)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=(0, 2, 4))


def get_inputs():
    return [torch.randn(2, 3, 4, 5, 6)]


def get_init_inputs():
    return []
