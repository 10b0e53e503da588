"""A Linear whose rows are normalised by an InstanceNorm2d read through two unsqueezes (each
row a (1, 1, F) plane), squeezed back and combined with a second input: the GEMM, the row
family's norm over what it wrote viewed as (B, 1, 1, F), then a pointwise kernel over that
result viewed back as (B, F). KernelBench level 2's BMM_InstanceNorm task is this kind."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.InstanceNorm2d(out_features)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        x = self.norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)
        return (x + y) * y


VERIFY_SHAPES = [{"batch": 1}, {"batch": 37}]

batch = 96
in_features = 64
out_features = 160


def get_inputs():
    return [torch.rand(batch, in_features), torch.rand(batch, out_features)]


def get_init_inputs():
    return [in_features, out_features]
