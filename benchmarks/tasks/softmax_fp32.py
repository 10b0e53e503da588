"""Row softmax over the last dim, fp32. PERFORMANCE.md tier A: (32768, 4096)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 4096
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 4096}, {"batch_size": 127, "dim": 1000}, {"batch_size": 64, "dim": 32768}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
