"""C = A^T @ B with A stored K x M, bf16."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}, {"M": 128, "N": 1001, "K": 77}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
