"""A 3 -> 16 channel Conv3d with a (3, 3, 1) filter over volumes whose last dim is 10 long,
then a bias and ReLU, fp32 (KernelBench L1 59's kind): the direct kernel merges the 10-value
rows into the planes' long rows (its W filter is one tap), so its span reads and stores are
128-bit though no row of the tensor is a multiple of 4 values."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 16, (3, 3, 1), padding=(1, 0, 0))

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.rand(2, 3, 12, 20, 10)]


def get_init_inputs():
    return []
