"""Conv2d 3x3, GroupNorm (8 groups), times a per-channel scale, MaxPool2d(2), clamp: three kernels (the conv with its bias, GroupNorm with the scale fused, the pooling with the clamp fused), 64 -> 128 channels, 32 x 64 x 64, bf16."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
num_groups = 8
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, dtype=DTYPE)
        self.group_norm = nn.GroupNorm(num_groups, out_channels, dtype=DTYPE)
        self.scale = nn.Parameter(torch.randn(out_channels, 1, 1, dtype=DTYPE))
        self.maxpool = nn.MaxPool2d(kernel_size=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.group_norm(self.conv(x))
        x = self.maxpool(x * self.scale)
        return torch.clamp(x, min=0.0, max=1.0)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
