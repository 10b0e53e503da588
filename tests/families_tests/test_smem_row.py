"""Long rows (issue 17): a row op that writes rows and walks its CTA slice in chunks may keep
the slice in shared memory between the statistics pass and the output pass
(``TUNABLES["smem_row"]``), so x is read from global memory once instead of twice; and few
long rows may be split over independent CTAs (strategy ``split``, two launches). Both exist
only where they can matter, the root offers them right after the default, and a parent that
has the knob gets the flip as a move. (What they compile to is checked in test_compile.py;
GPU correctness in test_families_gpu.py.)"""

import random
from dataclasses import replace

from cutegen.codegen.candidate import parse_tunables
from cutegen.codegen.families.moves import family_moves, recognition_for
from cutegen.codegen.families.render import LONG_ROW_COLS, knobs, long_row, row_cols
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
    assert values["smem_row"] is False and choices["smem_row"] == [False, True]
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
    assert props[0].move.params.get("smem_row") is None
    assert props[1].move.params == {"family": "row", "op": "softmax", "strategy": "auto",
                                    "fused": True, "smem_row": True}
    assert "shared memory" in props[1].move.description
    assert props[2].move.params["strategy"] == "split"  # then the split, before the rest
    assert parse_tunables(props[1].candidate.code)["smem_row"].value is True
    assert parse_tunables(props[0].candidate.code)["smem_row"].value is False
    flips = [p for p in family_moves(RewriteContext(task=task, parent=props[0].candidate))
             if p.move.params.get("name") == "smem_row"]
    assert len(flips) == 1 and flips[0].move.params["to"] is True
    assert parse_tunables(flips[0].candidate.code)["smem_row"].value is True
    back = [p for p in family_moves(RewriteContext(task=task, parent=props[1].candidate))
            if p.move.params.get("name") == "smem_row"]
    assert back[0].move.params["to"] is False
