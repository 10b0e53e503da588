"""nn.AdaptiveAvgPool2d(1) (a global average: the mean over the spatial dims), bf16, (128, 512, 56, 56)."""
import torch
import torch.nn as nn

batch_size = 128
channels = 512
height = 56
width = 56
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "height": 1, "width": 1}, {"batch_size": 3, "channels": 127, "height": 7, "width": 9}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
