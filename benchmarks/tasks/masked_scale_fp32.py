"""Zero the masked elements (a bool mask argument), scale the rest, fp32, (16384, 16384)."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 65537}]


class Model(nn.Module):
    def __init__(self, scale: float = 1.5):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(mask, 0.0) * self.scale


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE), torch.rand(batch_size, dim) > 0.5]


def get_init_inputs():
    return [1.5]
