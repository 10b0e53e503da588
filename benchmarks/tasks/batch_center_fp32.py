"""Each channel centred on its mean over the batch and the spatial dims, fp32, (32, 64, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 32
features = 64
height = 128
width = 128
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "features": 3, "height": 7, "width": 9},
                 {"batch_size": 5, "features": 127, "height": 16, "width": 16},
                 {"batch_size": 2, "features": 1, "height": 1, "width": 4097}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(dim=(0, 2, 3), keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, features, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
