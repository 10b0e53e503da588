"""The conv tails' launch plans (``templates/conv_tail.py.tmpl``), taken from a rendered
candidate: how BatchNorm's two launches cut each channel into ranges, and how wide a norm
tail's accesses are.

The chain bench of 2026-12-04 (H200) put conv2d_softplus_multiply_batchnorm_bf16 at 0.49x
torch.compile and conv_transpose3d_batchnorm_center_fp32 at 0.94x: the BatchNorm tail ran
one CTA per channel (64 and 32 CTAs on 132 SMs) reading one element at a time. It now runs
S CTAs a channel (the per-range sums, then the normalisation) with vector accesses, and
GroupNorm / InstanceNorm tails read and write whole vectors too.
"""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")


@pytest.fixture(scope="module")
def tail(tmp_path_factory):
    return fd.rendered_module(tmp_path_factory.mktemp("tail"), "conv2d_softplus_multiply_batchnorm_bf16")


def _covers(splits: int, chunk: int, total: int) -> bool:
    """The ranges [s * chunk, min((s + 1) * chunk, total)) are the kernel's: every vector in
    exactly one, none empty."""
    seen = []
    for s in range(splits):
        lo, hi = s * chunk, min((s + 1) * chunk, total)
        if hi <= lo:
            return False
        seen.extend(range(lo, hi))
    return seen == list(range(total))


def _last_wave_fill(ctas: int, sms: int) -> float:
    """How full the last wave of ``ctas`` CTAs is, at its worst over 4 or 3 resident an SM."""
    return min(ctas / (-(-ctas // (occ * sms)) * occ * sms) for occ in (4, 3))


def test_batch_norm_cuts_each_channel_into_ranges_that_fill_the_gpu(tail):
    # the bench's shape: 64 channels of 32 x 126 x 126 bf16, 4-element vectors
    total = 32 * (126 * 126 // 4)
    splits, chunk = tail._bn_split(32, 64, 126 * 126, 4, 132)
    assert _covers(splits, chunk, total)
    assert _last_wave_fill(64 * splits, 132) >= 0.9
    # KernelBench L2 15: 32 channels of a large fp32 output, one element a vector (an odd
    # plane); 17 ranges made 544 CTAs for 528 slots (4 a SM), a second wave of 16 CTAs
    splits, chunk = tail._bn_split(16, 32, 31 * 63 * 63, 1, 132)
    assert _covers(splits, chunk, 16 * 31 * 63 * 63)
    assert _last_wave_fill(32 * splits, 132) >= 0.95
    # L2 72: 16 channels, whole waves
    splits, chunk = tail._bn_split(128, 16, 63 * 63 * 63, 1, 132)
    assert _covers(splits, chunk, 128 * 63 ** 3) and _last_wave_fill(16 * splits, 132) >= 0.95
    # 200 channels: 2 ranges (400 CTAs, 0.76 of a wave) lose to 7 (1,400: 2.65 waves)
    assert _last_wave_fill(200 * tail._bn_split(128, 200, 32 * 32, 4, 132)[0], 132) > 0.8
    # chosen once a shape: the search over ranges costs ~100 us of Python, every call
    tail._bn_split.cache_clear()
    assert tail._bn_split(16, 32, 123039, 1, 132) == tail._bn_split(16, 32, 123039, 1, 132)
    assert tail._bn_split.cache_info().hits == 1
    # few elements: one range, every thread keeping at least 4 vectors
    assert tail._bn_split(1, 64, 7 * 9, 1, 132) == (1, 63)
    assert tail._bn_split(2, 3, 4096, 4, 132)[0] == 1
    splits, chunk = tail._bn_split(3, 5, 9 * 40, 1, 132)
    assert _covers(splits, chunk, 3 * 9 * 40)


def test_norm_tail_vectors_stay_in_a_plane_and_follow_alignment(tail):
    bf16, f32 = torch.bfloat16, torch.float32

    def vec(shape, dtype, out_dtype=None, offset=0):
        n = 1
        for s in shape:
            n *= s
        y = torch.empty(n + offset, dtype=dtype)[offset:].view(shape)
        out = torch.empty(shape, dtype=out_dtype or dtype)
        return tail._tail_vec(y, out, n // (shape[0] * shape[1]))

    assert vec((2, 3, 22, 30, 30), bf16) == 8  # 16 bytes
    assert vec((2, 3, 126, 126), bf16) == 4  # 15876 = 4 x 3969: no 8
    assert vec((2, 3, 62, 62), f32) == 4
    assert vec((2, 3, 31, 63, 63), f32) == 1  # an odd plane
    assert vec((2, 3, 22, 30, 30), bf16, offset=1) == 1  # an input 2 bytes off 16
    assert vec((2, 3, 22, 30, 30), f32, out_dtype=bf16) == 4  # 16 bytes of the fp32 side
