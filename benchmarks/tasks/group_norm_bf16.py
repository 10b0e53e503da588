"""nn.GroupNorm with 8 groups of 64 channels (affine), bf16, (64, 64, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 64
features = 64
groups = 8
height = 128
width = 128
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "height": 7, "width": 9}, {"batch_size": 3, "height": 16, "width": 17},
                 {"batch_size": 2, "height": 1, "width": 1}]


class Model(nn.Module):
    def __init__(self, features: int, groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, features, dtype=DTYPE)
        with torch.no_grad():
            self.gn.weight.copy_(torch.randn(features))
            self.gn.bias.copy_(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features, groups]
