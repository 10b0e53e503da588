"""nn.BatchNorm2d with running statistics (eval mode), then ReLU, bf16, (64, 128, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 64
features = 128
height = 128
width = 128
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "height": 7, "width": 9}, {"batch_size": 3, "height": 16, "width": 17},
                 {"batch_size": 127, "height": 1, "width": 1}]


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(features, dtype=DTYPE)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.randn(features))
            self.bn.running_var.copy_(torch.rand(features) + 0.5)
            self.bn.weight.copy_(torch.randn(features))
            self.bn.bias.copy_(torch.randn(features))
        self.bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return [features]
