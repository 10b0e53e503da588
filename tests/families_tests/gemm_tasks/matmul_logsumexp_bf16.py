"""logsumexp(A @ B, dim=1, keepdim=True), bf16."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(torch.matmul(A, B), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
