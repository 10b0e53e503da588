"""Batched A @ B^T times a module attribute (attention scores)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2)) * self.scale


def get_inputs():
    return [torch.randn(4, 32, 16, dtype=torch.bfloat16), torch.randn(4, 48, 16, dtype=torch.bfloat16)]


def get_init_inputs():
    return [0.125]
