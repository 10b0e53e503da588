"""C = (A @ B) * scale + R (a module attribute and a residual tensor), bf16."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, A: torch.Tensor, B: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B) * self.scale + R


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE),
            torch.randn(M, N, dtype=DTYPE)]


def get_init_inputs():
    return [0.125]
