"""torch.mm(x, W.t()) * 0.5 + residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 128, dtype=torch.bfloat16))

    def forward(self, x, residual):
        return torch.mm(x, self.w.t()) * 0.5 + residual


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16), torch.randn(32, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
