"""Row sums of values past 3 replaced by +inf, fp32: most rows hold a few infs (their sum is
inf), some none (a finite sum). The compensated fp32 sum's error term is NaN once the running
sum is inf; the result must still be inf (kl_div_bf16 gave NaN on the H200 where a probability
rounded to zero)."""
import torch
import torch.nn as nn

batch = 64
cols = 4097
DTYPE = torch.float32

VERIFY_SHAPES = [{"batch": 1, "cols": 7}, {"batch": 127, "cols": 1000}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 3.0, float("inf"), x).sum(-1)


def get_inputs():
    return [torch.randn(batch, cols, dtype=DTYPE)]


def get_init_inputs():
    return []
