"""Mean of 1 - cosine similarity of two (16384, 16384) fp32 tensors along the rows: three row
sums, then a mean of their pointwise combination (a chain of four kernels)."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1000}, {"batch_size": 127, "dim": 4097}]


class Model(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        cosine_sim = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine_sim)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=DTYPE), torch.randn(batch_size, dim, dtype=DTYPE)]


def get_init_inputs():
    return []
