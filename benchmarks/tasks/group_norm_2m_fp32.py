"""nn.GroupNorm with 8 groups of 64 channels (affine) over (16, 64, 512, 512) fp32: 128 groups
of 2,097,152 values (8 MiB each), the group size of KernelBench level 1 problem 35 (issue 17:
rows too long for a cluster's shared memory, read twice by the default kernel)."""
import torch
import torch.nn as nn

batch_size = 16
features = 64
groups = 8
height = 512
width = 512

VERIFY_SHAPES = [{"batch_size": 1},
                 {"batch_size": 3, "features": 24, "height": 61, "width": 1001}]


class Model(nn.Module):
    def __init__(self, features: int, groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, features)
        with torch.no_grad():
            self.gn.weight.copy_(torch.randn(features))
            self.gn.bias.copy_(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch_size, features, height, width)]


def get_init_inputs():
    return [features, groups]
