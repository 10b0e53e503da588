"""torch.triu(relu(bmm), diagonal=1) of fp32 operands (3xTF32)."""
import torch
import torch.nn as nn

L = 4
M = 256
N = 320
K = 128
DTYPE = torch.float32

VERIFY_SHAPES = [{"L": 1, "M": 1, "N": 8, "K": 8}, {"L": 2, "M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return torch.triu(torch.relu(torch.bmm(A, B)), diagonal=1)


def get_inputs():
    return [torch.randn(L, M, K, dtype=DTYPE), torch.randn(L, K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
