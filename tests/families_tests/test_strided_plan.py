"""The strided family's launch plan (``_strided_plan`` in ``templates/strided.py.tmpl``), taken
from a rendered candidate: how a map over the channel dim (an RMSNorm over C of (N, C, H, W))
splits a CTA's threads between columns side by side and row lanes walking C, and whether a
thread's rows stay in registers for the second pass (``keep``: x read once, not twice).

rmsnorm_channels_bf16 (C = 128) ran at 66 % of copy bandwidth on the H200, at the ceiling of
two reads, where the fp32 one, whose rows were kept, ran at 97 %: bf16's 8-wide vectors hold
twice as many values a row, so 32 threads side by side left a thread 16 rows x 8 values, over
the 64 kept. The plan now halves the threads side by side until the rows fit.
"""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")


def test_a_bf16_channel_map_trades_columns_for_rows_until_they_fit(tmp_path):
    plan = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16")._strided_plan
    tc, tr, _, splits, keep = plan(32, 128, 256 * 256, 8, True, 0)
    assert keep and splits == 1
    assert (tc, tr) == (16, 16)  # 8 rows x 8 values a thread; 16 x 16 B side by side
    # fp32's 4-wide vectors fit at the default split: unchanged
    assert plan(32, 128, 256 * 256, 4, True, 0)[:2] == (32, 8)
    assert plan(32, 128, 256 * 256, 4, True, 0)[4]


def test_no_keep_where_trading_cannot_fit_or_the_strategy_reloads(tmp_path):
    plan = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16")._strided_plan
    # 4096 channels: even 4 threads side by side leave too many rows; the threads stay as they were
    tc, tr, _, _, keep = plan(2, 4096, 4096, 8, True, 0)
    assert (tc, tr, keep) == (32, 8, False)
    reload = fd.rendered_module(tmp_path, "rmsnorm_channels_bf16", strategy="reload")._strided_plan
    assert reload(32, 128, 256 * 256, 8, True, 0)[:2] == (32, 8)
    assert not reload(32, 128, 256 * 256, 8, True, 0)[4]
    # a reduction (no map) never keeps, and keeps its split
    assert not plan(32, 128, 256 * 256, 8, False, 0)[4]
