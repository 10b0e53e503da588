"""Linear, scale and LeakyReLU in fp32 at a public-benchmark size: (1024 x 8192) @ (8192 x
8192)^T + bias, times 2.0, LeakyReLU(0.01) (issue 17: the goal is >= 2x eager within 1e-4; a
ragged last wave at M = 1024, and a one-row hidden shape at the full N and K)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
in_features = 8192
out_features = 8192
scale = 2.0
negative_slope = 0.01

VERIFY_SHAPES = [{"batch_size": 1},
                 {"batch_size": 127, "in_features": 520, "out_features": 1000}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float, negative_slope: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = scale
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x * self.scale
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, negative_slope]
