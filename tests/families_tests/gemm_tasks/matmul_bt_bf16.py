"""C = A @ B^T with B stored N x K (an nn.Linear weight layout), bf16."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}, {"M": 127, "N": 1001, "K": 519}, {"M": 300, "N": 72, "K": 40}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(N, K, dtype=DTYPE)]


def get_init_inputs():
    return []
