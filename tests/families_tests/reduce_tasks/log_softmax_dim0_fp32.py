"""F.log_softmax over dim 0 of a matrix (each column normalised): x - logsumexp(x, 0, keepdim=True), the strided family's logsumexp mapped back."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 512
cols = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"rows": 1, "cols": 8}, {"rows": 127, "cols": 129}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
