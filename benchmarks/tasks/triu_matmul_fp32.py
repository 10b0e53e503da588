"""torch.triu of a matrix product, fp32 (3xTF32 on the tensor cores), 4096^3."""
import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096
DTYPE = torch.float32

VERIFY_SHAPES = [{"M": 1, "N": 8, "K": 8}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.triu(A @ B)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
