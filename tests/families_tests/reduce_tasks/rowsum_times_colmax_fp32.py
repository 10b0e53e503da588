"""x.sum(-1, keepdim=True) * x.amax(0, keepdim=True): a row statistic times a column statistic, (rows, 1) * (1, cols), an outer product of two reductions: a chain of the two reduction kernels and a pointwise kernel (refused before 2026-12-03's seventh session)."""
import torch
import torch.nn as nn

rows = 512
cols = 1024
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 8}, {"rows": 127, "cols": 129}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1, keepdim=True) * x.amax(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
