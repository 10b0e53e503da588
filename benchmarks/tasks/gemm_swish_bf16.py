"""Linear layer, Swish and a scale (KernelBench L2 "Matmul_Swish_Scaling"): (y * sigmoid(y)) * scaling_factor with y = x @ W^T + b, bf16, (8192 x 8192) @ (8192 x 8192)."""
import torch
import torch.nn as nn

batch_size = 8192
in_features = 8192
out_features = 8192
scaling_factor = 2.0
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "in_features": 256, "out_features": 256}, {"batch_size": 127, "in_features": 520, "out_features": 1000}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features, dtype=DTYPE)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.matmul(x)
        x = x * torch.sigmoid(x)
        return x * self.scaling_factor


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
