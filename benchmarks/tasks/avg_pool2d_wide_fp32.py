"""nn.AvgPool2d(7, stride 7, padding 3) (count_include_pad), fp32, (16, 48, 1400, 1400): windows
at a wide stride, 6.0 GB in."""
import torch
import torch.nn as nn

batch_size = 16
channels = 48
height = 1400
width = 1400
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "height": 5, "width": 8},
                 {"batch_size": 2, "channels": 3, "height": 131, "width": 1004},
                 {"batch_size": 1, "channels": 2, "height": 29, "width": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=7, stride=7, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
