"""Conv3d 3x3x3, GroupNorm(8 groups), then the mean of everything but the batch dim (one value per sample): the conv kernel with its GroupNorm tail, then a row mean of what it wrote; 3 -> 24 channels, 64 x 24 x 32 x 32, bf16."""
import torch
import torch.nn as nn

batch_size = 64
in_channels = 3
out_channels = 24
depth = 24
height = 32
width = 32
kernel_size = 3
num_groups = 8
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 5, 'height': 7, 'width': 9}, {'batch_size': 3, 'depth': 4, 'height': 11, 'width': 6}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, dtype=DTYPE)
        self.group_norm = nn.GroupNorm(num_groups, out_channels, dtype=DTYPE)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.group_norm(x)
        return x.mean(dim=[1, 2, 3, 4])


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
