"""nn.Linear without bias, then tanh-GELU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(128, 64, bias=False, dtype=torch.bfloat16)
        self.act = nn.GELU(approximate='tanh')

    def forward(self, x):
        return self.act(self.fc(x))


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
