"""F.scaled_dot_product_attention(q, k, v) of [batch, heads, seq, dim] tensors (KernelBench level 1's form): lowered to softmax(q @ k^T / sqrt(dim)) @ v, a chain of a batched product with the scale fused, the row softmax and a second batched product (refused before 2026-12-03's seventh session: the function was unknown, and products of 4-d operands were not covered)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
num_heads = 4
seq = 96
dim = 64

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 3}]


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (batch_size, num_heads, seq, dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
