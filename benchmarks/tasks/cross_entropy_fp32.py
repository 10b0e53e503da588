"""Cross-entropy (mean) from logits with int64 targets, fp32, (32768, 32768)."""
import torch
import torch.nn as nn

batch_size = 32768
num_classes = 32768
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "num_classes": 32768}, {"batch_size": 127, "num_classes": 1000}, {"batch_size": 16, "num_classes": 131072}]
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
