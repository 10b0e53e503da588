"""torch.einsum("ki,kj->ij") (A transposed times B)."""
import torch
import torch.nn as nn

M = 256
N = 384
K = 128
DTYPE = torch.float16

VERIFY_SHAPES = [{"M": 8, "N": 8, "K": 1}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.einsum("ki,kj->ij", A, B)


def get_inputs():
    return [torch.randn(K, M, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
