"""C = A @ B, fp32: a narrow output of a long K (KernelBench level 1's "large K" product,
smaller here): its 256 columns are two full 128-wide tiles, where 192-wide ones would leave
the second two thirds zeros (gemm.fp32_tile_n)."""
import torch
import torch.nn as nn

M = 256
N = 256
K = 65536

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 4096}, {"M": 127, "N": 129, "K": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
