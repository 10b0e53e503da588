"""ConvTranspose3d 3x3x3, stride 2, padding 1, logsumexp over the channels (keepdim), HardSwish, minus a bias, clamp: the channel reduction a second kernel with the rest fused into it, 32 -> 16 channels, 4 x 8 x 16 x 16, fp32."""
import torch
import torch.nn as nn

batch_size = 4
in_channels = 32
out_channels = 16
depth = 8
height = 16
width = 16
kernel_size = 3
DTYPE = torch.float32

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 3, 'height': 5, 'width': 7}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=2, padding=1, dtype=DTYPE)
        self.bias = nn.Parameter(torch.randn(1, 1, 1, 1, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.logsumexp(self.conv(x), dim=1, keepdim=True)
        x = x * torch.sigmoid(x + 3) / 6
        x = x - self.bias
        return torch.clamp(x, min=-1, max=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
