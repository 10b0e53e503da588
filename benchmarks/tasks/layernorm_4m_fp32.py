"""LayerNorm over the last three dims of a 4-D fp32 tensor, (16, 64, 256, 256) normalised over
(64, 256, 256): 16 rows of 4,194,304 values, with a 4M-element weight and bias (issue 17:
few very long rows, which must still fill 132 SMs)."""
import torch
import torch.nn as nn

batch_size = 16
features = 64
dim1 = 256
dim2 = 256

VERIFY_SHAPES = [{"batch_size": 1, "features": 64, "dim1": 256, "dim2": 256},
                 {"batch_size": 3, "features": 7, "dim1": 33, "dim2": 1001}]


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [(features, dim1, dim2)]
