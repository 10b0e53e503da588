"""Hinge loss with one +-1 label per row, averaged over every element, fp32, (16384, 16384)."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1000}, {"batch_size": 127, "dim": 4097}, {"batch_size": 3, "dim": 65536}]


class Model(nn.Module):
    def forward(self, predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * labels, min=0))


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE), torch.randn(batch_size, 1, dtype=DTYPE).sign()]


def get_init_inputs():
    return []
