"""Tensor-method forms: x.matmul(torch.transpose(w.swapaxes(0, 1), 0, 1).t()), then ELU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return nn.functional.elu(x.matmul(torch.transpose(w.swapaxes(0, 1), 0, 1).t()))


def get_inputs():
    return [torch.randn(32, 128, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)]


def get_init_inputs():
    return []
