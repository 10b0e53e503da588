"""nn.InstanceNorm2d (no affine), fp32, (64, 64, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 64
features = 64
height = 128
width = 128
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "features": 3, "height": 7, "width": 9},
                 {"batch_size": 2, "features": 127, "height": 16, "width": 16},
                 {"batch_size": 1, "features": 2, "height": 512, "width": 513}]


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features]
