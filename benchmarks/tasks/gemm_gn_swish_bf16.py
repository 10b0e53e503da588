"""Linear -> GroupNorm -> Swish -> times a scale parameter (two family kernels), bf16,
4096 x 4096 -> 8192."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 8192
num_groups = 32
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, dtype=DTYPE)
        self.gn = nn.GroupNorm(num_groups, out_features, dtype=DTYPE)
        self.scale = nn.Parameter(torch.randn(out_features, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gn(self.gemm(x))
        return x * torch.sigmoid(x) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
