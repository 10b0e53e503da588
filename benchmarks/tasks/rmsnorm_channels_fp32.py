"""RMS normalisation over the channel dim of (N, C, H, W) (each pixel's C values), fp32,
(32, 64, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 32
features = 64
height = 256
width = 256
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "features": 3, "height": 7, "width": 9},
                 {"batch_size": 2, "features": 127, "height": 16, "width": 16},
                 {"batch_size": 1, "features": 64, "height": 1, "width": 4097}]


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-5):
        super().__init__()
        self.features = features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features]
