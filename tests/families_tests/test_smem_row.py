"""Long rows (issue 17): a row op that writes rows and walks its CTA slice in chunks may keep
the slice in shared memory between the statistics pass and the output pass
(``TUNABLES["smem_row"]``), so x is read from global memory once instead of twice; and few
long rows may be split over independent CTAs (strategy ``split``, two launches). Both exist
only where they can matter, the root offers them right after the default, and a parent that
has the knob gets the flip as a move. (What they compile to is checked in test_compile.py;
GPU correctness in test_families_gpu.py.)"""

import random
from dataclasses import replace
from pathlib import Path

from cutegen.codegen.candidate import parse_tunables
from cutegen.codegen.families.moves import family_moves, recognition_for
from cutegen.codegen.families.render import (
    LONG_ROW_COLS,
    SMEM_ROW_BYTES,
    few_unheld_rows,
    knobs,
    long_row,
    row_cols,
    smem_row_fits,
)
from cutegen.codegen.rewriters.base import RewriteContext
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import load_bundled_task


def _plan(name):
    task = load_bundled_task(name)
    rec = recognition_for(task, in_process=True)
    return task, next(p for p in rec.plans if p.family == "row")


def test_the_knob_exists_for_long_rows_that_are_written():
    _, plan = _plan("softmax_393k_fp32")
    assert row_cols(plan) == 393216 and long_row(plan)
    values, choices = knobs(plan)
    assert values["smem_row"] is True and choices["smem_row"] == [True, False]
    assert values["async_stage"] is True and values["l2_hints"] is False
    assert values["strategy"] == "auto" and choices["strategy"][-2:] == ["split", "resident"]


def test_no_knob_for_short_rows_or_one_value_per_row():
    _, short = _plan("softmax_bf16")
    assert row_cols(short) is not None and row_cols(short) < LONG_ROW_COLS
    assert "smem_row" not in knobs(short)[0] and "split" not in knobs(short)[1]["strategy"]
    _, long = _plan("softmax_393k_fp32")
    reduction = replace(long, op="sum", out_shape="rows")  # one value per row: one pass
    assert not long_row(reduction) and "smem_row" not in knobs(reduction)[0]


def test_root_offers_it_second_and_the_parent_gets_the_flip():
    task, _ = _plan("softmax_393k_fp32")
    props = [p for p in BuiltinRewriter().initial(RewriteContext(task=task), n=8,
                                                  rng=random.Random(0))
             if p.move.kind == "family"]
    # the default stages the slice (one read of x); the second reads x twice
    assert props[0].move.params.get("smem_row") is None
    assert props[1].move.params == {"family": "row", "op": "softmax", "strategy": "auto",
                                    "fused": True, "smem_row": False}
    assert "read twice" in props[1].move.description
    assert props[2].move.params["strategy"] == "split"  # then the split, before the rest
    assert parse_tunables(props[1].candidate.code)["smem_row"].value is False
    assert parse_tunables(props[0].candidate.code)["smem_row"].value is True
    flips = [p for p in family_moves(RewriteContext(task=task, parent=props[0].candidate))
             if p.move.params.get("name") == "smem_row"]
    assert len(flips) == 1 and flips[0].move.params["to"] is False
    assert parse_tunables(flips[0].candidate.code)["smem_row"].value is False
    back = [p for p in family_moves(RewriteContext(task=task, parent=props[1].candidate))
            if p.move.params.get("name") == "smem_row"]
    assert back[0].move.params["to"] is True


def test_few_rows_no_cluster_can_hold_start_split_without_the_knob():
    """16 rows of 4M fp32 (a LayerNorm over (64, 256, 256)): 2 MiB a CTA in a cluster of 8,
    past shared memory, so the kernel would drop ``smem_row`` (the knob is not offered, and
    the root's second candidate is no longer the first again), and 8 CTAs a row fill 128 of
    132 SMs: the split strategy is the default (225.3 against auto's 258.0 us on the H200)."""
    task, plan = _plan("layernorm_4m_fp32")
    assert row_cols(plan) == 4 * 1024 * 1024 and long_row(plan)
    assert not smem_row_fits(plan) and few_unheld_rows(plan)
    values, choices = knobs(plan)
    assert values["strategy"] == "split" and "smem_row" not in choices
    props = [p for p in BuiltinRewriter().initial(RewriteContext(task=task), n=4,
                                                  rng=random.Random(0))
             if p.move.kind == "family"]
    assert [p.move.params["strategy"] for p in props[:2]] == ["split", "auto"]
    assert not any(p.move.params.get("smem_row") for p in props)
    # 1.5 MiB rows: a cluster holds them; 4096 rows fill the GPU anyway
    _, sm = _plan("softmax_393k_fp32")
    assert smem_row_fits(sm) and not few_unheld_rows(sm)
    assert knobs(sm)[0]["strategy"] == "auto"
    # fewer rows: still split; from 17 rows clusters of 8 make more CTAs than the SMs

    def rows(n):
        return replace(plan, leaves=tuple(replace(lf, shape=(n, 64, 256, 256))
                                          if lf.name == plan.main else lf for lf in plan.leaves))

    assert few_unheld_rows(rows(3)) and not few_unheld_rows(rows(17))


def test_the_shared_memory_bound_matches_the_row_template():
    text = (Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
            / "row.py.tmpl").read_text()
    line = next(x for x in text.splitlines() if x.startswith("_SMEM_ROW_BYTES ="))
    assert eval(line.split("=", 1)[1].split("#")[0]) == SMEM_ROW_BYTES  # noqa: S307


def test_l2_hints_is_a_long_row_knob_flipped_as_a_move():
    """``l2_hints`` (the output stored, and x read for the last time, evict-first in L2)
    exists for long rows that are written, off by default, and a parent gets its flip."""
    task, plan = _plan("layernorm_4m_fp32")
    values, choices = knobs(plan)
    assert values["l2_hints"] is False and choices["l2_hints"] == [False, True]
    _, short = _plan("softmax_bf16")
    assert "l2_hints" not in knobs(short)[0]
    parent = next(p for p in BuiltinRewriter().initial(RewriteContext(task=task), n=1,
                                                       rng=random.Random(0))).candidate
    flips = [p for p in family_moves(RewriteContext(task=task, parent=parent))
             if p.move.params.get("name") == "l2_hints"]
    assert len(flips) == 1 and flips[0].move.kind == "tunable"
    assert flips[0].move.params["to"] is True
    assert parse_tunables(flips[0].candidate.code)["l2_hints"].value is True
