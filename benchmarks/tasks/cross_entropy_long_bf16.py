"""Cross-entropy (mean) from logits with int64 targets, bf16. PERFORMANCE.md tier A: (8192, 131072), a large vocabulary."""
import torch
import torch.nn as nn

batch_size = 8192
num_classes = 131072
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "num_classes": 131072}, {"batch_size": 127, "num_classes": 1000}, {"batch_size": 16, "num_classes": 262144}]
INPUT_DISTRIBUTIONS = ["randn", "randn_mean3", "uniform", "large", "small", "negative"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits, targets)


def get_inputs():
    return [
        torch.randn(batch_size, num_classes, dtype=DTYPE),
        torch.randint(0, num_classes, (batch_size,), dtype=torch.int64),
    ]


def get_init_inputs():
    return []
