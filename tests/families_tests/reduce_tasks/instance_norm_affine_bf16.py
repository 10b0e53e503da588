"""nn.InstanceNorm1d with an affine weight and bias, then GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
channels = 24
length = 512
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "length": 2}, {"batch_size": 3, "length": 4099}]


class Model(nn.Module):
    def __init__(self, channels: int = 24):
        super().__init__()
        self.inorm = nn.InstanceNorm1d(channels, affine=True, dtype=DTYPE)
        with torch.no_grad():
            self.inorm.weight.copy_(torch.randn(channels))
            self.inorm.bias.copy_(torch.randn(channels))

    def forward(self, x):
        return F.gelu(self.inorm(x))


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return [channels]
