"""Linear -> BatchNorm1d (batch statistics) -> GELU -> GroupNorm -> mean over the features ->
ReLU (a level-2 style chain: four family kernels), fp32, 2048 x 4096 -> 4096."""
import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096
num_groups = 16
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 2}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        self.gn = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = self.bn(x)
        x = torch.nn.functional.gelu(x)
        x = self.gn(x)
        x = torch.mean(x, dim=1, keepdim=True)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
