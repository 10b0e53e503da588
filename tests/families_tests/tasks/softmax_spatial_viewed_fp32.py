"""A softmax over each channel's spatial positions, spelled as a view merging them, the softmax
over the merged dim, a view back and a per-channel scale: one row kernel over the last 2 dims,
the views identities, the scale a per-row operand of its epilogue."""
import torch
import torch.nn as nn

batch_size = 16
channels = 48
height = 40
width = 56

VERIFY_SHAPES = [{"batch_size": 1, "height": 7, "width": 9}, {"batch_size": 5, "height": 33, "width": 31}]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(1, channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        y = torch.softmax(x.view(b, c, -1) * 2.0, dim=2)
        return y.view(b, c, h, w) * self.scale


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
