"""torch.tril of a matrix product (the tiles above the diagonal skip the main loop)."""
import torch
import torch.nn as nn

M = 512
N = 512
K = 256
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"M": 1, "N": 8, "K": 8}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
