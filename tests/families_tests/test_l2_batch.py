"""The split strategy's two launches a few rows at a time (``TUNABLES["l2_batch"]``, issue 17's
few very long rows, KernelBench L1 40's LayerNorm over (64, 256, 256)): the statistics launch
over all 16 rows of 16 MiB reads 256 MiB before the output launch starts, so the output
launch reads x from DRAM a second time; over 32 MiB of rows at a time it reads x again from
L2. Off by default until it is measured on a GPU (a move turns it on).

No GPU here: the rendered layernorm_4m_fp32 candidate runs on the CPU with its compile
replaced by the kernel object and each launch by the kernel's contract (the statistics launch
of ``n_rows`` rows at x's pointer; the output launch normalising those rows, with the weight
and bias, at the output's pointer). Checked: what the host decides (the rows each pair of
launches takes, their pointers, every row written once) against the task's own reference."""

import random
from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

from cutegen.codegen.candidate import parse_tunables
from cutegen.codegen.families.moves import family_moves
from cutegen.codegen.families.render import knobs
from cutegen.codegen.rewriters.base import RewriteContext
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import load_bundled_task

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")

_int = fd.launch_int
NORM = (8, 64, 64)  # 32768 values a row: the split strategy takes 4 CTAs a row
N = 8 * 64 * 64


class _Emulator(fd.HostEmulator):
    def go(self, fn, vptrs, ptrs, dst, n_rows, scalars, stream):
        op = fn[1]
        assert type(op).__name__ == "LayerNormRow" and op.N == N
        rows = _int(n_rows)
        x_at = self.cand._PTR_INFO[id(vptrs[0])][2]
        self.launches.append((op.phase, rows, x_at, op.cluster_n))
        if op.phase == "stats":
            return
        x = self.flat(vptrs[0])[:rows * N].view(rows, N).double()
        w, b = self.flat(vptrs[1])[:N].double(), self.flat(vptrs[2])[:N].double()
        var, mean = torch.var_mean(x, 1, unbiased=False, keepdim=True)
        y = (x - mean) / torch.sqrt(var + op.opts["eps"]) * w + b
        out = self.flat(dst)
        assert torch.isnan(out[:rows * N]).all(), "a row written twice"
        out[:rows * N] = y.reshape(-1).to(out.dtype)


def _run(tmp_path, monkeypatch, batch_bytes, rows, **tunables):
    cand, emu = fd.emulated_module(tmp_path, "layernorm_4m_fp32", monkeypatch, _Emulator,
                                   "_row_compiled", **tunables)
    monkeypatch.setattr(cand, "_L2_BATCH_BYTES", batch_bytes)
    ref = fd.task_module("layernorm_4m_fp32").Model(NORM)
    model = cand.ModelNew(NORM)
    with torch.no_grad():
        ref.ln.weight.copy_(torch.rand(NORM) + 0.5)
        ref.ln.bias.copy_(torch.randn(NORM))
    model.load_state_dict(ref.state_dict())
    emu.keep(model.ln.weight.data)
    emu.keep(model.ln.bias.data)
    x = emu.keep(torch.randn(rows, *NORM) * 3 + 1)
    with torch.no_grad():
        got, want = model(x), ref(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    return emu.launches, x.data_ptr()


@pytest.mark.parametrize("rows", [5, 4, 1])
def test_two_launches_per_batch_of_rows_cover_every_row_once(tmp_path, monkeypatch, rows):
    launches, x0 = _run(tmp_path, monkeypatch, 2 * N * 4, rows, strategy="split",
                        l2_batch=True)
    row_bytes = N * 4
    want = []
    for r0 in range(0, rows, 2):
        n = min(2, rows - r0)
        want += [("stats", n, x0 + r0 * row_bytes), ("output", n, x0 + r0 * row_bytes)]
    assert [(p, r, a) for p, r, a, _ in launches] == want
    assert all(c >= 2 for *_, c in launches)  # each row still split over several CTAs


def test_off_or_rows_within_the_batch_launch_once(tmp_path, monkeypatch):
    # the default: one statistics launch and one output launch over every row
    launches, x0 = _run(tmp_path, monkeypatch, 2 * N * 4, 5, strategy="split")
    assert [(p, r, a) for p, r, a, _ in launches] == [("stats", 5, x0), ("output", 5, x0)]
    # on, but the rows fit one batch: the same two launches
    launches, x0 = _run(tmp_path, monkeypatch, 8 * N * 4, 5, strategy="split", l2_batch=True)
    assert [(p, r, a) for p, r, a, _ in launches] == [("stats", 5, x0), ("output", 5, x0)]
    # on with another strategy: no batches (one launch of the auto walk)
    launches, _ = _run(tmp_path, monkeypatch, 2 * N * 4, 5, strategy="auto", l2_batch=True)
    assert [(p, r) for p, r, *_ in launches] == [("", 5)]


def test_the_knob_is_offered_where_split_is_the_default_and_flipped_by_a_move():
    values, choices = knobs(fd.plan_of("layernorm_4m_fp32"))
    assert values["strategy"] == "split"
    assert values["l2_batch"] is False and choices["l2_batch"] == [False, True]
    assert "l2_batch" not in knobs(fd.plan_of("softmax_393k_fp32"))[0]  # auto holds its rows
    assert "l2_batch" not in knobs(fd.plan_of("softmax_bf16"))[0]
    task = load_bundled_task("layernorm_4m_fp32")
    parent = next(p for p in BuiltinRewriter().initial(RewriteContext(task=task), n=1,
                                                       rng=random.Random(0))).candidate
    flips = [p for p in family_moves(RewriteContext(task=task, parent=parent))
             if p.move.params.get("name") == "l2_batch"]
    assert len(flips) == 1 and flips[0].move.params["to"] is True
    assert parse_tunables(flips[0].candidate.code)["l2_batch"].value is True
