"""Linear, logsumexp over the features, then Mish and a scale on each row's value."""
import torch
import torch.nn as nn

batch_size = 256
in_features = 512
out_features = 1024
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, in_features: int = 512, out_features: int = 1024):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=DTYPE)

    def forward(self, x):
        return torch.nn.functional.mish(torch.logsumexp(self.linear(x), dim=1, keepdim=True)) * 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=DTYPE)]


def get_init_inputs():
    return [in_features, out_features]
