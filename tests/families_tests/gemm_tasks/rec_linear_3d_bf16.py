"""A Linear over [batch, seq, features]: the leading dims fold into M (not batched)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(128, 64, dtype=torch.bfloat16)

    def forward(self, x, gate):
        return torch.relu(self.proj(x)) * gate


def get_inputs():
    return [torch.randn(2, 16, 128, dtype=torch.bfloat16), torch.randn(2, 16, 1, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
