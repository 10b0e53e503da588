"""gelu(x @ W^T + b) (nn.Linear then exact GELU), bf16."""
import torch
import torch.nn as nn

batch_size = 2048
in_features = 2048
out_features = 2048
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "in_features": 256, "out_features": 256}, {"batch_size": 127, "in_features": 520, "out_features": 1000}, {"batch_size": 33, "in_features": 136, "out_features": 1001}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features]
