"""nn.MaxPool2d(2, 2), fp32, (64, 64, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 64
channels = 64
height = 256
width = 256
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "height": 2, "width": 3}, {"batch_size": 2, "channels": 3, "height": 127, "width": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
