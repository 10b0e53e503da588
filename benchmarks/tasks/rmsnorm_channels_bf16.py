"""RMS normalisation over the channel dim of (N, C, H, W) with a per-channel weight, bf16,
(32, 128, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 32
features = 128
height = 256
width = 256
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "features": 3, "height": 7, "width": 9},
                 {"batch_size": 2, "features": 127, "height": 16, "width": 16},
                 {"batch_size": 1, "features": 64, "height": 1, "width": 4104}]


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(features, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = x.float().pow(2).mean(dim=1, keepdim=True)
        return (x.float() * torch.rsqrt(ms + self.eps)).to(x.dtype) * self.weight.view(1, -1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features]
