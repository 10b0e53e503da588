"""Argmin over dim 1 of a (B, R, C) tensor with an odd C (KernelBench L1 52's form at a
quarter of its rows). Its fold (knob ``s_fold``, off by default until run on a GPU) reads 4
rows of R as one row and merges each column's (value, index) statistics in StridedFinish,
index r' of the folded rows made 4 r' + q."""
import torch
import torch.nn as nn

batch_size = 8
dim1 = 1024
dim2 = 1023

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 3, "dim1": 1021}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmin(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]
