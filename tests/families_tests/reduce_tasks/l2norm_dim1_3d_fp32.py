"""x / ||x||_2 over the middle dim of (B, C, L) (a norm mapped back over a strided dim)."""
import torch
import torch.nn as nn

batch_size = 4
channels = 48
length = 256
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "length": 4}, {"batch_size": 3, "channels": 300, "length": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return x / x.norm(p=2, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
