"""nn.LayerNorm followed by ReLU (an epilogue), fp32."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 9, "dim": 333}, {"batch_size": 4, "dim": 40000}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.ln(x))


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [dim]
