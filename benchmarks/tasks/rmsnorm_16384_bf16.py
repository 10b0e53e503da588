"""RMSNorm over the last dim with weight, bf16. PERFORMANCE.md tier A: (32768, 16384)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 16384
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 16384}, {"batch_size": 127, "dim": 10000}, {"batch_size": 16, "dim": 65536}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, 1e-6)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim]
