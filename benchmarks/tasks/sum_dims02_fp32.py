"""Sum over the batch and last dims of (N, C, L) (per-channel totals), fp32, (64, 512, 8192) -> (512,)."""
import torch
import torch.nn as nn

batch_size = 64
channels = 512
length = 8192
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch_size": 1, "channels": 127, "length": 1000}, {"batch_size": 3, "channels": 1, "length": 4097},
                 {"batch_size": 129, "channels": 17, "length": 8}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=(0, 2))


def get_inputs():
    return [torch.randn(batch_size, channels, length, dtype=DTYPE)]


def get_init_inputs():
    return []
