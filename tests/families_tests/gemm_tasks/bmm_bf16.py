"""Batched C[l] = A[l] @ B[l], bf16."""
import torch
import torch.nn as nn

L = 8
M = 1024
N = 1024
K = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"L": 2, "M": 1, "N": 256, "K": 256}, {"L": 3, "M": 127, "N": 1000, "K": 520}, {"L": 1, "M": 64, "N": 1001, "K": 136}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(L, M, K, dtype=DTYPE), torch.randn(L, K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
