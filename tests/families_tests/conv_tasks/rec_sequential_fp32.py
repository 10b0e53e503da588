"""A conv inside nn.Sequential (submodule "features.0"), then ReLU: the candidate reaches it
as getattr(self.features, '0')."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.features(x)


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return []
