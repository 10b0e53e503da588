"""LayerNorm over the last two dims of a 3-d input (weight and bias of shape (T, C)), bf16."""
import torch
import torch.nn as nn

batch_size = 256
seq = 16
dim = 512
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "seq": 16, "dim": 512}, {"batch_size": 3, "seq": 7, "dim": 100}]


class Model(nn.Module):
    def __init__(self, seq: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(seq, dim, dtype=DTYPE))
        self.bias = nn.Parameter(torch.randn(seq, dim, dtype=DTYPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, x.shape[-2:], self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(batch_size, seq, dim, dtype=DTYPE)]


def get_init_inputs():
    return [seq, dim]
