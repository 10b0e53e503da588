"""torch.softmax over the channels (dim 1) of an NCHW tensor: exp(x - logsumexp(x, 1, keepdim=True)), the strided family's logsumexp mapped back (refused before 2026-12-03's seventh session: "softmax is computed along the last dimension(s) only")."""
import torch
import torch.nn as nn

batch = 16
channels = 64
height = 32
width = 32
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch": 1, "channels": 3, "height": 5, "width": 7},
                 {"batch": 2, "channels": 129, "height": 3, "width": 11}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch, channels, height, width, dtype=DTYPE)]


def get_init_inputs():
    return []
