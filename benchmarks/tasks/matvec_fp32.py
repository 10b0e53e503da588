"""Matrix times a vector, A (2048, 262144) @ b (262144, 1), fp32: memory-bound (2 GB of A read
once), a row reduction rather than a GEMM with one output column."""
import torch
import torch.nn as nn

M = 2048
K = 262144
DTYPE = torch.float32

VERIFY_SHAPES = [{"M": 1, "K": 1000}, {"M": 127, "K": 4097}]


class Model(nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K, dtype=DTYPE), torch.rand(K, 1, dtype=DTYPE)]


def get_init_inputs():
    return []
