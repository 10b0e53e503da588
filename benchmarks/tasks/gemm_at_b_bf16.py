"""Matrix product with a transposed left operand, C = A^T @ B (A stored K x M, i.e. M-major), bf16, M = N = 8192, K = 1024.

A is read through its transpose, so its row stride is M: the verification shapes keep M and N
multiples of 8 (16-byte rows for TMA) while K and the tile edges stay ragged."""
import torch
import torch.nn as nn

M = 8192
N = 8192
K = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 8, "N": 256, "K": 256}, {"M": 136, "N": 1000, "K": 520}, {"M": 4096, "N": 4096, "K": 4096}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
