"""Row sums of one forward taken together (``_Sums`` / ``SumsRow`` in the row templates).

A cosine similarity is three row sums (x1·x2, x1·x1, x2·x2) and a mean of their combination;
a triplet-margin loss two (|a - p|², |a - n|²). As one kernel per sum, each sum re-read its
inputs: four reads of the rows where two would do (cosine_loss_fp32 ran at 53 % of copy
bandwidth on the H200, 0.60x torch.compile). The chain's renderer now sends consecutive
plain row sums of the forward's own tensors through one ``_Sums`` per call, which launches
the sums of the same rows as one ``SumsRow`` kernel reading each distinct operand once, where
one pass per row can take them (rows too few and long to fill the GPU keep their two-pass
reductions, one sum at a time).

Checked here: which stages go together (render), and on the CPU with real sm_90a compiles and
the compiled programs' runs recorded, how many launches a call makes and where they write.
The values are checked on the GPU (``test_families_gpu.py``: every task's Model).
"""

from dataclasses import replace
from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.families.plan import Chain, Leaf, PwNode
from cutegen.codegen.families.render_chain import _summed_together


def _stages(name: str):
    return fd.plan_of(name).param("stages")


def test_the_sums_of_a_cosine_and_a_triplet_loss_go_together():
    assert _summed_together(_stages("cosine_loss_fp32")) == {0, 1, 2}
    assert _summed_together(_stages("triplet_loss_fp32")) == {0, 1}


def test_only_runs_of_plain_sums_of_the_inputs_go_together():
    st = list(_stages("cosine_loss_fp32"))
    # a sum with something after it (its epilogue) is not a plain sum
    epi = replace(st[1], epilogue=Chain((PwNode(0, "sqrt", ("%y",)),), "%0"))
    assert _summed_together((st[0], epi, st[2], st[3])) == set()
    # a sum that reads an earlier stage's result waits for it
    late = replace(st[2], leaves=st[2].leaves + (Leaf("_stage0", "input", "_stage0", "full",
                                                      "float32", (16384,)),))
    assert _summed_together((st[0], st[1], late, st[3])) == {0, 1}
    # one sum alone, and the last stage (whose result is the forward's), stay as they are
    assert _summed_together((st[0], st[3])) == set()
    assert _summed_together((st[0], st[1])) == set()
    # a mean is not a sum here
    mean = replace(st[1], op="mean")
    assert _summed_together((st[0], mean, st[2], st[3])) == set()


def test_the_rendered_forward_flushes_the_sums_before_the_stage_that_reads_them():
    src = fd.rendered("cosine_loss_fp32")
    fwd = src[src.index("def _cutegen_forward"):]
    assert fwd.count("_sums.reduce(SumRow, ") == 3 and fwd.count("_row_reduce(") == 1
    assert fwd.index("_sums = _Sums()") < fwd.index("_sums.reduce(") \
        < fwd.index("_sums.flush()") < fwd.index("_row_reduce(")


_DRIVER = fd.CHILD_CAND + r'''
import sys as _sys
cand.REPLAY = False
ran = []
je.JitCompiledFunction.run_compiled_program = lambda self, exe: ran.append(
    (type(self).__name__, [cand._entry(e) for e in exe]))
names = []
real_launch = cand._row_launch
def launch(op_cls, *a, **k):
    names.append(op_cls.__name__)
    return real_launch(op_cls, *a, **k)
cand._row_launch = launch
m = cand.ModelNew(*task.get_init_inputs())
log = {}
for label, sizes in (("small", {}), ("long", {"batch_size": 4, "rows": 4, "dim": 65536,
                                              "cols": 65536})):
    for k, v in sizes.items():
        if hasattr(task, k):
            setattr(task, k, v)
    del ran[:], names[:]
    with torch.no_grad():
        m(*task.get_inputs())
    log[label] = {"launches": len(ran), "ops": list(names)}
print(json.dumps(log))
'''


@pytest.mark.slow
@pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")
@pytest.mark.parametrize("name,sums,last", [
    ("cosine_loss_fp32", 3, ["SumRow"]),  # then the mean
    ("triplet_loss_fp32", 2, ["SumRow"]),
    ("cosine_rows_bf16", 3, []),  # then a pointwise kernel (not a row launch)
])
def test_the_sums_are_one_launch_where_one_pass_takes_them(name, sums, last):
    log = fd.run_child(_DRIVER, name)
    # short rows: one launch for every sum, then the last kernel
    assert log["small"]["ops"] == ["SumsRow"] + last, log
    assert log["small"]["launches"] == 2, log
    # four rows of 65,536: each sum is cut into pieces to fill the GPU (two passes each),
    # one at a time, as before
    assert "SumsRow" not in log["long"]["ops"], log
    assert log["long"]["ops"].count("SumRow") >= 2 * sums, log
