"""The pointwise kernel's (rows, N) view: N over several trailing dims where the last alone is
short (``codegen/families/pw_view.py``).

BatchNorm in eval mode on a (B, C, 128, 128) bf16 tensor is a pointwise kernel with four
per-channel operands. With rows of the last dim alone (128 values: 16 accesses of 8) its CTAs
were one warp with half the lanes idle; on the H200 it reached 71% of the copy bandwidth
(BENCHMARKS.md of 99581e0, issue 19's kinds) where the family's other kernels reach 87-109%. Its rows are
now H x W, the per-channel operands one value per (b, c) row. The candidate's forward is run
here on the CPU with the kernel launch emulated in torch (each row operand gathered with the
candidate's own ``_row_at`` / ``_rowmap``), at the main shape and every VERIFY_SHAPES entry.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cutegen.codegen.families.pw_view import view_dims, view_score

sys.path.insert(0, str(Path(__file__).parent))
import _famdata as fd  # noqa: E402


def test_short_last_dims_take_more_dims_when_every_operand_allows():
    frame = (64, 128, 128, 128)
    per_channel = (128, 1, 1)
    assert view_dims(frame, [frame, per_channel], 2) == 2
    # a per-column bias over the last dim is only a per-column vector of rows of W
    assert view_dims(frame, [frame, (128,)], 2) == 1
    # rows long enough for full CTAs stay as they are
    assert view_dims((4096, 393216), [(4096, 393216)], 4) == 1
    assert view_dims((64, 512, 512), [(64, 512, 512), (512, 1)], 2) == 1
    # full operands only: any trailing dims; an odd last dim no wide access divides
    assert view_dims((256, 64, 7, 7), [(256, 64, 7, 7)], 4) > 1
    # a per-(b, c) operand of a (B, C, H, W) result keeps rows of H x W (its kind: per row)
    assert view_dims((32, 64, 16, 16), [(32, 64, 16, 16), (32, 64, 1, 1)], 4) == 2


def test_view_score_counts_idle_lanes_small_ctas_and_narrow_accesses():
    assert view_score(1 << 20, 1024, 2) == pytest.approx(1.0)
    assert view_score(1 << 20, 128, 2) == pytest.approx(0.5 * 0.5)  # half a warp, 32-thread CTAs
    assert view_score(1 << 20, 7, 4) < 0.1  # one-element accesses, 7 of 32 lanes
    assert view_score(2, 4096, 4) == pytest.approx(0.5)  # 2 of a thread's 4 rows
    assert view_score(0, 4096, 4) == 0.0


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _emulated_launch(mod):
    """``_pw_launch`` in torch for batch_norm_eval_bf16's chain (relu(BN(x))): each row operand
    gathered per row with the candidate's own ``_row_at``."""
    def launch(fn, vec_ops, full, row_ops, row_kinds, scalars, out):
        n_rows, n_cols = out.shape
        assert full == (True,) and vec_ops[0].shape == (n_rows, n_cols)
        rows = []
        for t, kind in zip(row_ops, row_kinds, strict=True):
            idx = torch.tensor([mod._row_at(kind, r) for r in range(n_rows)], dtype=torch.long)
            rows.append(t.float()[idx].view(n_rows, 1))
        mean, var, w, b = rows
        y = (vec_ops[0].float() - mean) * torch.rsqrt(var + 1e-5) * w + b
        out.copy_(torch.relu(y).to(out.dtype))
    return launch


@pytest.mark.parametrize("overrides", [{"batch_size": 2, "height": 12, "width": 10},
                                       {"batch_size": 1, "height": 7, "width": 9},
                                       {"batch_size": 3, "height": 16, "width": 17},
                                       {"batch_size": 5, "height": 1, "width": 1}])
def test_batch_norm_eval_reads_each_channel_on_rows_of_h_by_w(tmp_path, overrides):
    plan = fd.plan_of("batch_norm_eval_bf16")
    assert plan.family == "pointwise" and plan.param("k") == 2
    mod = fd.rendered_module(tmp_path, "batch_norm_eval_bf16")
    assert "n_cols = math.prod(shape[len(shape) - 2:])" in fd.rendered("batch_norm_eval_bf16")
    mod._pw_launch = _emulated_launch(mod)
    task = _load(fd.task_path("batch_norm_eval_bf16"))
    for k, v in overrides.items():
        setattr(task, k, v)
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs()).eval()
    new = mod.ModelNew(*task.get_init_inputs()).eval()
    new.load_state_dict(ref.state_dict())
    x = task.get_inputs()[0]
    got = new(x)
    bn = ref.bn
    want = torch.relu(F.batch_norm(x.float(), bn.running_mean.float(), bn.running_var.float(),
                                   bn.weight.float(), bn.bias.float(), False, 0.0, bn.eps))
    assert got.shape == x.shape and got.dtype == x.dtype
    torch.testing.assert_close(got.float(), want, rtol=1.6e-2, atol=1e-2)
