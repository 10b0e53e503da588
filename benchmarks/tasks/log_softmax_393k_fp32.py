"""Log-softmax over very long fp32 rows, (4096, 393216): 6.4 GB in, 12.9 GB moved. A row is
1.5 MiB, too long for one CTA's registers (issue 17)."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 393216

VERIFY_SHAPES = [{"batch_size": 1, "dim": 393216}, {"batch_size": 127, "dim": 300007}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
