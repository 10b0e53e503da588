"""nn.BatchNorm1d in training mode on (N, C) features (no spatial dims, as after a Linear),
a per-feature shift before it and a ReLU after, bf16."""
import torch
import torch.nn as nn

batch_size = 1000
features = 1540
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 2}, {"batch_size": 131, "features": 37}]


class Model(nn.Module):
    def __init__(self, features: int = 1540):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(features, dtype=DTYPE) * 0.1)
        self.bn = nn.BatchNorm1d(features, dtype=DTYPE)

    def forward(self, x):
        return torch.relu(self.bn(x + self.shift))


def get_inputs():
    return [torch.randn(batch_size, features, dtype=DTYPE) * 2.0 + 0.5]


def get_init_inputs():
    return [features]
