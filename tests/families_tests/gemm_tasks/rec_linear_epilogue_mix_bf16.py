"""Linear, a per-row scale, clamp, LeakyReLU, hardswish, Mish, tanh and sigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(128, 64, dtype=torch.bfloat16)
        self.leaky = nn.LeakyReLU(0.2)

    def forward(self, x, s):
        y = self.linear(x) * s
        y = torch.clamp(y, min=-3.0, max=3.0)
        y = F.hardswish(self.leaky(y))
        return torch.sigmoid(torch.tanh(F.mish(y)))


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16), torch.randn(32, 1, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
