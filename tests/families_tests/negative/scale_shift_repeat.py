"""y = 2x + 1 through Tensor.repeat (an op no built-in family covers): the task for the way on
when the built-in rewriter refuses (tools/llm_uncovered_demo.py)."""
import torch
import torch.nn as nn

batch_size = 2048
dim = 1024

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1024}, {"batch_size": 127, "dim": 1000}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(1, 1) * 2.0 + 1.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
