"""Linear, logsumexp over the features, then Mish on each row's value, bf16, 16384 x 8192 -> 8192."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
in_features = 8192
out_features = 8192
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(torch.logsumexp(self.linear(x), dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features]
