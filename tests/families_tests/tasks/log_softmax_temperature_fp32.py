"""log_softmax(x / temperature, dim=1) on a 2-d input, fp32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 2048
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 2048}, {"batch_size": 127, "dim": 1000}, {"batch_size": 2, "dim": 3}, {"batch_size": 3, "dim": 200003}]


class Model(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(x / self.temperature, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return [0.7]
