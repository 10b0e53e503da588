"""Cross-entropy with reduction='sum' and an ignore_index that some targets hit, bf16."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
num_classes = 8
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "num_classes": 8}, {"batch_size": 127, "num_classes": 1000}, {"batch_size": 16, "num_classes": 50257}]
INPUT_DISTRIBUTIONS = ["randn", "uniform", "large", "small", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="sum", ignore_index=3)


def get_inputs():
    return [torch.randn(batch_size, num_classes, dtype=DTYPE), torch.randint(0, num_classes, (batch_size,), dtype=torch.int64)]


def get_init_inputs():
    return []
