"""KernelBench's hinge-loss form: (batch,) labels times (batch, dim) predictions with
batch == dim, so torch broadcasts the labels along the columns; at batch 1 they are one value
spread over every column (the hidden shape that found the bug: the candidate raised)."""
import torch
import torch.nn as nn

batch_size = 512
dim = 512
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 1, "dim": 4097}]


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    return [torch.rand(batch_size, dim, dtype=DTYPE),
            torch.randint(0, 2, (batch_size,)).to(DTYPE) * 2 - 1]


def get_init_inputs():
    return []
