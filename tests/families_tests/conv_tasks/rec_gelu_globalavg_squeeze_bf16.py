"""Conv2d, GELU, global average pooling, then squeeze(-1).squeeze(-1) (KernelBench's
Conv2d_GELU_GlobalAvgPool pattern): the pooling a second kernel, the squeezes views."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16
VERIFY_SHAPES = [{"batch_size": 1, "size": 9}]
batch_size = 8
size = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, dtype=DTYPE)

    def forward(self, x):
        x = F.gelu(self.conv(x))
        x = F.adaptive_avg_pool2d(x, 1)
        return x.squeeze(-1).squeeze(-1)


def get_inputs():
    return [torch.randn(batch_size, 16, size, size, dtype=DTYPE)]


def get_init_inputs():
    return []
