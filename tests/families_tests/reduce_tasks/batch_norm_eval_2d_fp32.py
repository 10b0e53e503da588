"""nn.BatchNorm1d with running statistics on (N, C): per-column operands."""
import torch
import torch.nn as nn

batch_size = 64
channels = 200
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127}]


class Model(nn.Module):
    def __init__(self, channels: int = 200):
        super().__init__()
        self.bn = nn.BatchNorm1d(channels)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(channels))
            self.bn.running_var.copy_(torch.rand(channels) + 0.5)
        self.bn.eval()

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, dtype=DTYPE)]


def get_init_inputs():
    return [channels]
