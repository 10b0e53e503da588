"""C = A @ B, fp32: a small output of a long K (the kind of KernelBench level 1's "large K"
product, smaller here), where 3xTF32's (hi, lo) pairs would move more bytes than the
product is worth in tensor-core time."""
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
