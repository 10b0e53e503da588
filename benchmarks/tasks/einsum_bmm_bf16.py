"""A batched matrix product written as torch.einsum("bij,bjk->bik"), bf16, 64 x 2048 x 2048 x 1024."""
import torch
import torch.nn as nn

L = 64
M = 2048
N = 2048
K = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"L": 1, "M": 1, "N": 8, "K": 8}, {"L": 3, "M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bij,bjk->bik", A, B)


def get_inputs():
    return [torch.randn(L, M, K, dtype=DTYPE), torch.randn(L, K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
