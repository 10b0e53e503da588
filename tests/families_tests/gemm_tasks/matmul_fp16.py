"""C = A @ B, fp16 (fp32 accumulation)."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.float16

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE) * 0.5, torch.randn(K, N, dtype=DTYPE) * 0.5]


def get_init_inputs():
    return []
