"""F.scaled_dot_product_attention(q, k, v) in fp16, KernelBench level 1 problem 97's dtype: the
scores q @ k^T / sqrt(dim) are written in fp32 and the probabilities in fp16, as PyTorch's
fused kernels keep them. With fp16 scores (before 2026-12-05's twentieth session) the
1e3-scaled inputs every evaluation draws overflowed to inf and the output was NaN, where the
reference's is finite (the H200 caught it on problem 97 at its upstream size)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
num_heads = 3
seq = 200
dim = 128

VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 3}]


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (batch_size, num_heads, seq, dim)
    return [torch.rand(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
