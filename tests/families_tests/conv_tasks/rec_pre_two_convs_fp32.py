"""Two convolutions in a row: the first conv kernel, then the second on what it wrote
(chains.before_conv), its bias and ReLU fused into its epilogue."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(16, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.b(self.a(x)))


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return []
