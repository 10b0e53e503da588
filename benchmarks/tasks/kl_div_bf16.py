"""KL divergence of log-probabilities against probabilities, reduction "batchmean", bf16,
(16384, 8192) x 2."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 8192
DTYPE = torch.bfloat16
#: probabilities: positive inputs only
INPUT_DISTRIBUTIONS = ["uniform"]

VERIFY_SHAPES = [{"batch_size": 1, "dim": 8}, {"batch_size": 127, "dim": 1000}, {"batch_size": 3, "dim": 65537}]


class Model(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    return [torch.rand(batch_size, dim, dtype=DTYPE).softmax(-1),
            torch.rand(batch_size, dim, dtype=DTYPE).softmax(-1)]


def get_init_inputs():
    return []
