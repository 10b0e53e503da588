"""nn.BatchNorm1d in training mode on (N, C, L), then scaled."""
import torch
import torch.nn as nn

batch_size = 16
channels = 40
length = 96
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 2, "length": 1}, {"batch_size": 3, "length": 4099}]


class Model(nn.Module):
    def __init__(self, channels: int = 40):
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return self.bn(x) * 0.5


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return [channels]
