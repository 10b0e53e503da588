"""A transposed conv whose stride divides its dilation (stride 2, dilation 2): every other
output phase has no filter tap, so it runs on the zero-inserted input instead of per phase;
plus a residual of the output's shape."""
import torch
import torch.nn as nn

DTYPE = torch.bfloat16
VERIFY_SHAPES = [{"batch_size": 1, "size": 7}]
batch_size = 4
size = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(32, 48, 2, stride=2, dilation=2, padding=1, dtype=DTYPE)

    def forward(self, x, r):
        return torch.relu(self.up(x)) + r


def get_inputs():
    out = (size - 1) * 2 - 2 + 2 * (2 - 1) + 1
    return [torch.randn(batch_size, 32, size, size, dtype=DTYPE),
            torch.randn(batch_size, 48, out, out, dtype=DTYPE)]


def get_init_inputs():
    return []
