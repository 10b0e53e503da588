"""F.conv_transpose3d with a weight from a forward argument, stride 2, output_padding 1; a
scalar tensor operand."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w, s):
        return F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1) + s


def get_inputs():
    return [torch.randn(2, 16, 4, 5, 6), torch.randn(16, 24, 3, 3, 3), torch.randn(())]


def get_init_inputs():
    return []
