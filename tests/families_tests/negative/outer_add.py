"""An outer-product broadcast: no operand has the output's shape."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    return [torch.randn(64, 1), torch.randn(1, 128)]


def get_init_inputs():
    return []
