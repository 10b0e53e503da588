"""One row through an fp32 Linear + LeakyReLU of K = N = 8192, on 1e3-scaled inputs only: the
check that once failed a correct 3xTF32 kernel. At one row the task's own reference is
cuBLAS's GEMV (1.3 fp32 rounding steps of the output's rms), and our kernel's error (3.3 steps,
as torch's own CPU GEMV) was past 2x it; the comparison's least bound is now 8 steps."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1
in_features = 8192
out_features = 8192

VERIFY_SHAPES = [{"batch_size": 3}]
INPUT_DISTRIBUTIONS = ["large"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.gemm(x), negative_slope=0.01)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
