"""ConvTranspose2d 4x4, stride 2, padding 1, MaxPool2d(2), Hardtanh, mean over the spatial dims (keepdim), tanh: three kernels, 64 -> 64 channels, 16 x 32 x 32, bf16."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 64
height = 32
width = 32
kernel_size = 4
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{'batch_size': 1, 'height': 17, 'width': 23}, {'batch_size': 3, 'height': 9, 'width': 40}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1, dtype=DTYPE)
        self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.hardtanh = nn.Hardtanh(min_val=-1.0, max_val=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv(x))
        x = self.hardtanh(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
