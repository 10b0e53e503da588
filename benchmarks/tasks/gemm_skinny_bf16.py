"""A skinny bf16 matrix product, (128 x 8192) @ (8192 x 8192) (issue 17: one row of 128 x 256
output tiles gives 32 tiles for 132 SMs; split-K or stream-K must fill the GPU)."""
import torch
import torch.nn as nn

M = 128
K = 8192
N = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1}, {"M": 127, "K": 520, "N": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
