"""x minus its mean over dims (0, 2) of (N, C, L), keepdim: a two-run statistic mapped back."""
import torch
import torch.nn as nn

batch_size = 8
channels = 24
length = 300
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "length": 1}, {"batch_size": 33, "channels": 5, "length": 4097}]


class Model(nn.Module):
    def forward(self, x):
        return x - x.mean(dim=(0, 2), keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
