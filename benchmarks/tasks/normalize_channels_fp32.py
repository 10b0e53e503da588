"""F.normalize over the channel dim of (N, C, H, W) (unit L2 norm per pixel), fp32,
(32, 64, 256, 256)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 64
height = 256
width = 256
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 3, "height": 7, "width": 9},
                 {"batch_size": 2, "channels": 127, "height": 16, "width": 16},
                 {"batch_size": 1, "channels": 64, "height": 1, "width": 4097}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2.0, dim=1)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
