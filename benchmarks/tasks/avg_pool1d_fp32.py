"""nn.AvgPool1d(4, stride 2, padding 1), fp32, (64, 128, 32768)."""
import torch
import torch.nn as nn

batch_size = 64
channels = 128
length = 32768
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 1, "length": 4}, {"batch_size": 3, "channels": 5, "length": 10007}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
