"""Attention written out over [batch, heads, seq, dim] bf16 tensors: torch.matmul of 4-d operands (the batch dims fold into one), a scale, softmax, a second product."""
import torch
import torch.nn as nn

batch_size = 2
num_heads = 4
seq = 128
dim = 64
DTYPE = torch.bfloat16

VERIFY_SHAPES = [{"batch_size": 1, "seq": 40}, {"batch_size": 3, "seq": 72}]


class Model(nn.Module):
    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * 0.125
        return torch.matmul(torch.softmax(s, dim=-1), v)


def get_inputs():
    shape = (batch_size, num_heads, seq, dim)
    return [torch.randn(shape, dtype=DTYPE), torch.randn(shape, dtype=DTYPE),
            torch.randn(shape, dtype=DTYPE)]


def get_init_inputs():
    return []
