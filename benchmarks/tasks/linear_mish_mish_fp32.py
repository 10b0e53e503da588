"""Linear then Mish twice in fp32 at a public-benchmark size: mish(mish((1024 x 8192) @
(8192 x 8192)^T + bias)) (issue 17: >= 2x eager within 1e-4, the epilogue's transcendentals
fused)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
in_features = 8192
out_features = 8192

VERIFY_SHAPES = [{"batch_size": 1},
                 {"batch_size": 127, "in_features": 520, "out_features": 1000}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(F.mish(self.linear(x)))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
