"""Linear without bias, scaled, plus a residual: x @ W^T * scale + residual, bf16, (8192 x 8192) @ (8192 x 8192)."""
import torch
import torch.nn as nn

batch_size = 8192
in_features = 8192
out_features = 8192
scale = 0.5
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "in_features": 256, "out_features": 256}, {"batch_size": 127, "in_features": 520, "out_features": 1000}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features, dtype=DTYPE) / in_features ** 0.5)
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T * self.scale + residual


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE), torch.randn(batch_size, out_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features, scale]
