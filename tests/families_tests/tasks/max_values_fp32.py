"""torch.max(x, dim=-1)[0] (the values of a max over the last dim) of a 3-d tensor, fp32."""
import torch
import torch.nn as nn

batch_size = 64
heads = 16
dim = 1024
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "heads": 1, "dim": 1024}, {"batch_size": 3, "heads": 5, "dim": 999}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=-1)[0]


def get_inputs():
    return [torch.randn(batch_size, heads, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
