"""A 4-d batched matmul ([B, H, M, K] @ [B, H, K, N]): the batch dims fold into one batched product (refused before 2026-12-03's seventh session)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(2, 2, 32, 16), torch.randn(2, 2, 16, 48)]


def get_init_inputs():
    return []
