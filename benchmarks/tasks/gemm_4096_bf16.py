"""Matrix product C = A @ B, bf16 with fp32 accumulation, M×N×K = 4096³ (PERFORMANCE.md tier C)."""
import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}, {"M": 4096, "N": 4096, "K": 4096}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
