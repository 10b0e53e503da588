"""Smooth L1 (Huber, beta 1) loss averaged over every element, fp32, (16384, 16384) x 2."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 100003}]


class Model(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE), torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
