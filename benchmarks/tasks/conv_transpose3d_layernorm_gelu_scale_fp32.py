"""ConvTranspose3d 4x4x4 stride 2, LayerNorm over the last dim (its size is the norm's), GELU, times a scale: the conv kernel, then a row LayerNorm of what it wrote with GELU and the scale fused; 16 -> 32 channels, 8 x 16 x 32 x 32 in (64 wide out), fp32."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 16
height = 32
width = 32
kernel_size = 4
stride = 2
padding = 1
scaling_factor = 1.5

VERIFY_SHAPES = [{'batch_size': 1, 'depth': 3, 'height': 5}, {'batch_size': 2, 'depth': 2, 'height': 7}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "small", "negative"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int,
                 norm_size: int, scaling_factor: float):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.layer_norm = nn.LayerNorm(norm_size)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_transpose(x)
        x = self.layer_norm(x)
        x = torch.nn.functional.gelu(x)
        return x * self.scaling_factor


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, 2 * width, scaling_factor]
