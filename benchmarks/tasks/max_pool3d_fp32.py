"""nn.MaxPool3d(3, stride 2, padding 1), fp32, (16, 32, 64, 64, 64)."""
import torch
import torch.nn as nn

batch_size = 16
channels = 32
depth = 64
height = 64
width = 64
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "depth": 3, "height": 4, "width": 3}, {"batch_size": 2, "channels": 3, "depth": 17, "height": 31, "width": 65}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
