"""C = A @ B, fp32 with a tolerance that admits TF32 tensor cores."""
import torch
import torch.nn as nn

M = 2048
N = 2048
K = 2048
DTYPE = torch.float32
# TF32 keeps 10 mantissa bits and the tensor cores truncate: over K = 2048 random products
# the absolute error reaches ~0.1 where outputs cancel (measured on the H200: 5 of 4.2M
# elements beyond atol 0.05), and with "large" inputs it scales with the inputs, not the
# outputs, so no relative tolerance covers it: those are not TF32 inputs.
TOLERANCE = {"atol": 0.25, "rtol": 1e-2}
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]

VERIFY_SHAPES = [{"M": 1, "N": 256, "K": 256}, {"M": 127, "N": 1000, "K": 520}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []
