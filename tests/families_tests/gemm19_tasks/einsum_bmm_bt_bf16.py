"""torch.einsum("bij,bkj->bik") (a batched product with B transposed), scaled."""
import torch
import torch.nn as nn

L = 4
M = 256
N = 384
K = 128
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"L": 1, "M": 1, "N": 8, "K": 8}, {"L": 3, "M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.einsum("bij,bkj->bik", A, B) * 0.5


def get_inputs():
    return [torch.randn(L, M, K, dtype=DTYPE), torch.randn(L, N, K, dtype=DTYPE)]


def get_init_inputs():
    return []
