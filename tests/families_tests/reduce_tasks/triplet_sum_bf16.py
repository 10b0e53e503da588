"""nn.TripletMarginLoss(margin=0.5, reduction="sum") of three bf16 matrices (two row sums taken
in one launch, then the sum of the hinge)."""
import torch
import torch.nn as nn

rows = 512
cols = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"rows": 1, "cols": 5}, {"rows": 131, "cols": 999}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=0.5, reduction="sum")

    def forward(self, a, p, n):
        return self.loss(a, p, n)


def get_inputs():
    return [torch.rand(rows, cols, dtype=DTYPE), torch.rand(rows, cols, dtype=DTYPE),
            torch.rand(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
