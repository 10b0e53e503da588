"""nn.CosineSimilarity over dim 1 of two bf16 matrices, one value per row (three row sums taken
in one launch, then a pointwise map of them)."""
import torch
import torch.nn as nn

rows = 256
cols = 3000
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"rows": 1, "cols": 7}, {"rows": 127, "cols": 4097}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cos = nn.CosineSimilarity(dim=1, eps=1e-6)

    def forward(self, a, b):
        return self.cos(a, b)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE), torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
