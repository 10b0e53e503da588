"""The strided family's launch plan (``_strided_plan`` in ``templates/strided.py.tmpl``), taken
from a rendered candidate: how a map over the channel dim (an RMSNorm over C of (N, C, H, W))
splits a CTA's threads between columns side by side and row lanes walking C, and whether a
thread's rows stay in registers for the second pass (``keep``: x read once, not twice).

rmsnorm_channels_bf16 (C = 128) ran at 66 % of copy bandwidth on the H200, at the ceiling of
two reads, where the fp32 one, whose rows were kept, ran at 97 %: bf16's 8-wide vectors hold
twice as many values a row, so 32 threads side by side left a thread 16 rows x 8 values, over
the 64 kept. The plan now halves the threads side by side until the rows fit.

A map's CTAs have 128 threads by default (``MAP_THREADS``; 256 before 2026-12-05): on an H100,
rmsnorm_channels_bf16 took 372 us at 128 and 410 at 256 (96 % and 87 % of copy bandwidth),
the fp32 maps the same at both.
"""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")


def test_a_bf16_channel_map_trades_columns_for_rows_until_they_fit(tmp_path):
    plan = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16")._strided_plan
    tc, tr, _, splits, keep = plan(32, 128, 256 * 256, 8, True, 0)
    assert keep and splits == 1
    assert (tc, tr) == (8, 16)  # 8 rows x 8 values a thread; 8 x 16 B side by side
    assert plan(32, 128, 256 * 256, 4, True, 0)[:2] == (16, 8)  # fp32: 8 rows x 4 values
    assert plan(32, 128, 256 * 256, 4, True, 0)[4]
    wide = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16", s_threads=256)._strided_plan
    assert wide(32, 128, 256 * 256, 8, True, 0)[:2] == (16, 16)
    # fp32's 4-wide vectors fit at 256 threads' default split: unchanged
    assert wide(32, 128, 256 * 256, 4, True, 0)[:2] == (32, 8)
    assert wide(32, 128, 256 * 256, 4, True, 0)[4]


def test_a_map_defaults_to_128_threads_and_a_reduction_to_256(tmp_path):
    for name, want in (("rmsnorm_channels_bf16", 128), ("normalize_channels_fp32", 128),
                       ("sum_dim1_fp32", 256)):
        assert fd.rendered_module(tmp_path, name).TUNABLES["s_threads"] == want, name


def test_no_keep_where_trading_cannot_fit_or_the_strategy_reloads(tmp_path):
    plan = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16")._strided_plan
    # 4096 channels: even 4 threads side by side leave too many rows; the threads stay as they were
    tc, tr, _, _, keep = plan(2, 4096, 4096, 8, True, 0)
    assert (tc, tr, keep) == (32, 4, False)
    reload = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16", strategy="reload")._strided_plan
    assert reload(32, 128, 256 * 256, 8, True, 0)[:2] == (32, 4)
    assert not reload(32, 128, 256 * 256, 8, True, 0)[4]
    # a reduction (no map) never keeps, and keeps its split
    assert not plan(32, 128, 256 * 256, 8, False, 0)[4]


def test_narrow_vectors_walk_as_many_rows_as_wide_ones(tmp_path):
    """Odd columns read 32-bit values; the walk still takes ``s_unroll`` rows a step (4),
    as for 128-bit vectors: 8 rows a step measured slower on KernelBench L1 47 (H100:
    3,437-3,563 us against 3,136-3,257 at 4). Two statistics words a column halve it for
    128-bit vectors only; the knob lowers it."""
    plan = fd.rendered_module(tmp_path, "sum_dim1_fp32")._strided_plan
    assert plan(128, 4096, 4095, 1, False, 0)[2] == 4  # KernelBench L1 47
    assert plan(128, 4096, 4094, 2, False, 0)[2] == 4
    assert plan(128, 4096, 4096, 4, False, 0)[2] == 4
    assert plan(128, 4096, 4095, 1, False, 0, 2)[2] == 4  # argmax: value and index
    assert plan(128, 4096, 4096, 4, False, 0, 2)[2] == 4
    assert plan(128, 4096, 4096, 8, False, 0, 2)[2] == 2  # bf16 x 8, two words
    low = fd.rendered_module(tmp_path, "sum_dim1_fp32", s_unroll=1)._strided_plan
    assert low(128, 4096, 4095, 1, False, 0)[2] == 1
