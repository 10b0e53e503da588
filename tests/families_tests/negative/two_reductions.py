"""Two reductions in one forward whose results meet in an outer product (a (64, 1) column of
row sums times a (1, 128) row of column maxima): no chain of family kernels takes it (the
amax does not read the sum's result, and the product is not a pointwise op of either's
shape). ``x.sum(-1) / x.amax(-1)`` was refused until 2026-12-02 and is a chain now."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1, keepdim=True) * x.amax(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
