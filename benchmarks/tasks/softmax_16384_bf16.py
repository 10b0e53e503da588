"""Row softmax over the last dim, bf16. PERFORMANCE.md tier A: (32768, 16384)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 16384}, {"batch_size": 127, "dim": 10000}, {"batch_size": 64, "dim": 65536}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
