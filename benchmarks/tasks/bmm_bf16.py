"""Batched matrix product C[b] = A[b] @ B[b], bf16, 8 x (4096 x 1024) @ (1024 x 4096) (bf16 with fp32 accumulation)."""
import torch
import torch.nn as nn

batch = 8
M = 4096
N = 4096
K = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch": 1, "M": 1, "N": 256, "K": 256}, {"batch": 3, "M": 127, "N": 1000, "K": 520}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch, M, K, dtype=DTYPE), torch.randn(batch, K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
