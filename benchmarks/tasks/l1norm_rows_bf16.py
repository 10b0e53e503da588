"""L1 normalisation of each row: x / sum(|x|), bf16, (32768, 8192)."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "dim": 8192}, {"batch_size": 127, "dim": 1000}, {"batch_size": 16, "dim": 262144}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
