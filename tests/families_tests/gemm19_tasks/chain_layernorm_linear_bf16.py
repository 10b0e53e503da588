"""LayerNorm -> Linear (bias) -> ReLU -> softmax over the outputs: three family kernels."""
import torch
import torch.nn as nn

batch_size = 64
dim = 512
out_features = 384
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, dim: int = 512, out_features: int = 384):
        super().__init__()
        self.ln = nn.LayerNorm(dim, dtype=DTYPE)
        self.fc = nn.Linear(dim, out_features, dtype=DTYPE)

    def forward(self, x):
        return torch.softmax(torch.relu(self.fc(self.ln(x))), dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim, out_features]
