"""Triplet-margin loss (margin 1, p = 2) of three (8192, 16384) fp32 tensors: two pairwise
distances as row sums, then the mean of the hinge (a chain of three kernels)."""
import torch
import torch.nn as nn

batch_size = 8192
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1000}, {"batch_size": 127, "dim": 4097}]


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = torch.nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor,
                negative: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(anchor, positive, negative)


def get_inputs():
    return [torch.rand(batch_size, dim, dtype=DTYPE), torch.rand(batch_size, dim, dtype=DTYPE),
            torch.rand(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [1.0]
