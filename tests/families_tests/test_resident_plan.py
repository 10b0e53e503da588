"""The row family's ``resident`` strategy (issue 17, few very long rows): one persistent launch
whose CTAs all fit on the GPU at once (one a SM), each row over ``cluster`` CTAs that keep their
slice of x in shared memory while the row's statistics meet behind a barrier in global memory.
x is read once, where the ``split`` strategy reads it twice over two launches. The plan
(``_resident_plan`` in ``templates/row.py.tmpl``) is taken from a rendered candidate."""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.families.render import knobs

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")


def _check(mod, n_rows, n_cols, vec, extra, esize, sms):
    got = mod._resident_plan(n_rows, n_cols, vec, extra, esize, sms)
    if got is None:
        return None
    (tpr, rows, cluster, chunks, nvec), groups = got
    slice_cols = tpr * vec * nvec * chunks
    assert rows == 1 and cluster >= 2
    assert groups * cluster <= sms, "every CTA must be resident at once"
    assert 1 <= groups <= n_rows
    assert slice_cols * cluster >= n_cols, "the row's slices cover it"
    assert (cluster - 1) * slice_cols < n_cols, "no CTA without columns"
    assert slice_cols * esize + (tpr // 32) * 16 + 16 <= mod._SMEM_ROW_BYTES
    return got


def test_few_long_rows_fill_the_gpu(tmp_path):
    mod = fd.rendered_module(tmp_path, "layernorm_4m_fp32")
    # 16 rows of 4M fp32 (16 MiB a row): one row at a time over 128 of 132 SMs (128 KiB each)
    (tpr, _, cluster, chunks, nvec), groups = _check(mod, 16, 1 << 22, 4, 2, 4, 132)
    assert (cluster, groups) == (128, 1)
    assert tpr * 4 * nvec * chunks * 4 == 128 * 1024
    # 1.5 MiB rows: eight CTAs a row, sixteen rows at once
    _, _, cluster, _, _ = _check(mod, 4096, 393216, 4, 0, 4, 132)[0]
    assert cluster == 8 and _check(mod, 4096, 393216, 4, 0, 4, 132)[1] == 16
    # odd rows and odd counts (the hidden shapes), bf16, another SM count
    for args in ((127, 300007, 1, 0, 4, 132), (3, 231231, 1, 2, 4, 132), (1, 1 << 22, 4, 2, 4, 132),
                 (5, 1 << 20, 8, 0, 2, 132), (7, 1 << 21, 4, 0, 4, 78), (1000, 70001, 1, 0, 4, 132)):
        assert _check(mod, *args) is not None, args


def test_rows_that_do_not_fit_or_fit_one_cta_get_none(tmp_path):
    mod = fd.rendered_module(tmp_path, "layernorm_4m_fp32")
    assert mod._resident_plan(4, 1 << 24, 4, 0, 4, 132) is None  # 64 MiB a row: > 132 SMs' smem
    assert mod._resident_plan(4, 1 << 22, 4, 0, 4, 16) is None  # a small GPU
    assert mod._resident_plan(64, 8192, 4, 0, 4, 132) is None  # one CTA holds the row


def test_the_strategy_is_offered_for_long_written_rows_only():
    for name in sorted(fd.BUNDLED_LONG):
        assert "resident" in knobs(fd.plan_of(name))[1]["strategy"], name
    assert "resident" not in knobs(fd.plan_of("softmax_bf16"))[1]["strategy"]


def test_group_norms_long_groups_get_the_long_rows_moves_with_their_defaults_kept():
    """GroupNorm's rows are (sample, group): C / groups * spatial values (8 MiB each in
    group_norm_2m_fp32, KernelBench L1 35's size). Long ones are offered the long rows'
    strategies and, where a group fits a cluster's shared memory (group_norm_bf16's 256 KiB
    groups), smem_row, as moves only: the default candidate is the one it was, until a GPU
    has timed the others."""
    from cutegen.codegen.families.render import row_cols

    long_gn = fd.plan_of("group_norm_2m_fp32")
    assert row_cols(long_gn) == 64 // 8 * 512 * 512
    values, choices = knobs(long_gn)
    assert {"split", "resident"} <= set(choices["strategy"]) and values["strategy"] == "auto"
    staged_gn = fd.plan_of("group_norm_bf16")
    values, choices = knobs(staged_gn)
    assert choices["smem_row"] == [True, False] and values["smem_row"] is False
    assert values["strategy"] == "auto"

