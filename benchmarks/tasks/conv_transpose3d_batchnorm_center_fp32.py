"""ConvTranspose3d 3x3x3 stride 2, BatchNorm3d in training mode, then each channel of each sample centred on its spatial mean (x - x.mean((2, 3, 4), keepdim=True)): the conv kernel with its BatchNorm tail, then a row mean applied back to its row; 16 -> 32 channels, 16 x 16 x 32 x 32 in, fp32."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 3, 'height': 5, 'width': 7}, {'batch_size': 2, 'depth': 4, 'height': 6, 'width': 3}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_transpose(x)
        x = self.batch_norm(x)
        return x - torch.mean(x, dim=(2, 3, 4), keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
