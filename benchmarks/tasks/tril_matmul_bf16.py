"""torch.tril of a matrix product, bf16, 8192 x 8192 x 8192 (the output tiles above the
diagonal are all zero: they skip the main loop)."""
import torch
import torch.nn as nn

M = 8192
N = 8192
K = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 8, "K": 8}, {"M": 127, "N": 1000, "K": 520}, {"M": 1000, "N": 127, "K": 64}]


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.tril(torch.matmul(A, B))


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
