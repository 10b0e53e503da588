"""nn.BatchNorm2d in training mode (batch statistics), fp32, (64, 64, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 64
features = 64
height = 128
width = 128
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "height": 7, "width": 9}, {"batch_size": 3, "height": 16, "width": 17},
                 {"batch_size": 127, "height": 1, "width": 1}]


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
        with torch.no_grad():
            self.bn.weight.copy_(torch.randn(features))
            self.bn.bias.copy_(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features]
