"""A skinny fp32 Linear, GELU and scale: (128 x 16384) @ (16384 x 16384)^T + bias, GELU, times
0.5 (issue 17). With 128 rows the product is bound by reading the weight (1 GiB in fp32;
eager's SGEMM is bound by its fp32 FMAs): 3xTF32 reads the weight's packed (hi, lo) pair,
2 GiB, where packing the three slots would read 3 GiB; its 86 output tiles (128 x 192) would
leave 46 of 132 SMs idle, so the default cuts K in 3 slices. The weight's packing is kept on
the module between calls. Verified at one row and at a ragged small shape too."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
in_features = 16384
out_features = 16384
scale = 0.5

VERIFY_SHAPES = [{"batch_size": 1},
                 {"batch_size": 33, "in_features": 600, "out_features": 1000}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
