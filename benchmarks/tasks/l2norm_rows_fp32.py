"""L2 normalisation of each row: x / ||x||_2, fp32, (16384, 16384)."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 16384}, {"batch_size": 127, "dim": 1000}, {"batch_size": 16, "dim": 262144}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
