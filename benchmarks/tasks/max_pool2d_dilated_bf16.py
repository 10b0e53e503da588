"""nn.MaxPool2d(3, stride 2, padding 1, dilation 2, ceil mode), bf16, (32, 64, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 256
width = 256
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "height": 5, "width": 5}, {"batch_size": 2, "channels": 3, "height": 127, "width": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
