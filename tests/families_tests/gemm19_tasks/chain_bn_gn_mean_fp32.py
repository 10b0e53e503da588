"""Linear -> BatchNorm1d -> GELU -> GroupNorm -> mean -> ReLU, small."""
import torch
import torch.nn as nn

batch_size = 128
in_features = 256
out_features = 192
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 2}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, in_features: int = 256, out_features: int = 192):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        self.gn = nn.GroupNorm(8, out_features)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.bn(self.gemm(x)))
        return torch.relu(torch.mean(self.gn(x), dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features]
