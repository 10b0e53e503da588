"""Linear -> GroupNorm -> min over the features (keepdim) -> + bias of shape (1, C, 1, 1): the result is (1, C, batch, 1), larger than the min's (batch, 1); four kernels, the last a pointwise outer broadcast."""
import torch
import torch.nn as nn

batch_size = 128
in_features = 512
out_features = 256
num_groups = 8
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 37}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, dtype=DTYPE)
        self.group_norm = nn.GroupNorm(num_groups, out_features, dtype=DTYPE)
        self.bias = nn.Parameter(torch.randn(1, out_features, 1, 1, dtype=DTYPE))

    def forward(self, x):
        x = self.group_norm(self.gemm(x))
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
