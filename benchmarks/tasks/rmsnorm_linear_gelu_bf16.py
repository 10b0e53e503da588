"""RMSNorm -> Linear -> GELU (a pre-norm projection: the norm's kernel, then the GEMM with its
bias and GELU), bf16, 8192 x 4096 -> 4096."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 4096
out_features = 4096
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, dim: int, out_features: int):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6, dtype=DTYPE)
        self.proj = nn.Linear(dim, out_features, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(self.norm(x)))


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim, out_features]
