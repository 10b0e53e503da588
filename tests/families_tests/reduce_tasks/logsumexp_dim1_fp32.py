"""torch.logsumexp over the middle dim of a 3-D tensor: the strided family's online (max, sum of exp) statistics per column (refused before 2026-12-03's seventh session: "the strided family has no logsumexp")."""
import torch
import torch.nn as nn

batch = 8
rows = 256
cols = 1024
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch": 1, "rows": 3, "cols": 5}, {"batch": 3, "rows": 127, "cols": 129}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=1)


def get_inputs():
    return [torch.randn(batch, rows, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
