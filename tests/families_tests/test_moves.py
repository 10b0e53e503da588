"""The built-in rewriter with kernel families: initial candidates, strategy / fuse moves,
profiler-hinted knob moves offered first, and every move recorded as a Move."""

import random
from pathlib import Path

import pytest

from cutegen.codegen.candidate import CandidateSource, parse_tunables, set_tunable
from cutegen.codegen.families.moves import (
    HINT_RULES,
    family_moves,
    hint_rules,
    read_family,
    recognition_for,
)
from cutegen.codegen.rewriters.base import RewriteContext
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import load_bundled_task, load_task_file
from cutegen.profilers import Finding

TASKS = Path(__file__).with_name("tasks")
NEGATIVE = Path(__file__).with_name("negative")


def _task(name):
    """A bundled task by name, or one of ours as "t/<name>" (covered) / "n/<name>" (not)."""
    if name.startswith(("t/", "n/")):
        t = load_task_file((TASKS if name[0] == "t" else NEGATIVE) / f"{name[2:]}.py")
    else:
        t = load_bundled_task(name)
    recognition_for(t, in_process=True)  # fill the cache without a child process
    return t


def _initial(name, n=8, *, families_only=True):
    """The task and its initial proposals (only the family ones unless asked: a bundled seed
    also matches our tasks whose names start with a seed's name)."""
    task = _task(name)
    props = BuiltinRewriter().initial(RewriteContext(task=task), n=n, rng=random.Random(0))
    return task, [p for p in props if p.move.kind == "family" or not families_only]


def test_initial_offers_seeds_then_family_strategies():
    _, props = _initial("softmax_bf16", families_only=False)
    assert [p.move.kind for p in props] == ["seed", "family", "family", "family", "family"]
    fam = props[1]
    assert fam.move.params == {"family": "row", "op": "softmax", "strategy": "auto",
                               "fused": True}
    # looped before cluster (STRATEGY_ORDER): a 4-evaluation search reaches looped, which
    # won cross-entropy on the H200 while cluster never won softmax
    assert [p.move.params["strategy"] for p in props[1:]] == ["auto", "registers", "looped",
                                                             "cluster"]
    assert read_family(fam.candidate.code)["op"] == "softmax"
    assert fam.candidate.origin.startswith("family:")


def test_initial_for_a_task_without_seeds_and_with_pointwise_ops():
    _, props = _initial("t/softmax_scale_bias_bf16")
    kinds = [(p.move.params["strategy"], p.move.params["fused"]) for p in props]
    assert kinds == [("auto", True), ("registers", True), ("looped", True), ("cluster", True),
                     ("auto", False)]
    assert BuiltinRewriter().initial(RewriteContext(task=_task("layernorm_fp32")), n=2,
                                     rng=random.Random(0))[1].move.params["strategy"] == "registers"


def test_uncovered_task_has_no_family_candidates_and_a_message():
    task = _task("n/conv2d")
    rw = BuiltinRewriter()
    assert rw.initial(RewriteContext(task=task), n=8, rng=random.Random(0)) == []
    assert "nn.Conv2d" in rw.not_covered(task) and "--rewriter llm" in rw.not_covered(task)
    assert rw.not_covered(_task("softmax_fp32")) == ""
    assert BuiltinRewriter(families=False).seeds(task) == []


def test_seeds_by_bundled_name_include_families():
    _task("cumsum_fp32")
    names = [p.move.kind for p in BuiltinRewriter().seeds("cumsum_fp32")]
    assert names == ["family", "family"]


def _ctx(task, parent, **kw):
    return RewriteContext(task=task, parent=parent, **kw)


def test_strategy_and_fuse_moves():
    task, props = _initial("t/softmax_scale_bias_bf16")
    fused, unfused = props[0].candidate, props[-1].candidate
    moves = list(family_moves(_ctx(task, fused)))
    strat = [p for p in moves if p.move.kind == "strategy"]
    assert sorted(p.move.params["to"] for p in strat) == ["cluster", "looped", "registers"]
    assert all(parse_tunables(p.candidate.code)["strategy"].value == p.move.params["to"]
               for p in strat)
    fuse = [p for p in moves if p.move.kind == "fuse"]
    assert len(fuse) == 1 and fuse[0].move.params == {"fuse": False}
    assert read_family(fuse[0].candidate.code)["fused"] is False
    back = [p for p in family_moves(_ctx(task, unfused)) if p.move.kind == "fuse"]
    assert back[0].move.params == {"fuse": True}
    assert back[0].candidate.code == fused.code  # knob values are kept


def test_fuse_keeps_the_parents_knobs():
    task, props = _initial("t/softmax_scale_bias_bf16")
    parent = CandidateSource(set_tunable(props[0].candidate.code, "vals_per_thread", 16))
    fuse = next(p for p in family_moves(_ctx(task, parent)) if p.move.kind == "fuse")
    assert parse_tunables(fuse.candidate.code)["vals_per_thread"].value == 16


def test_builtin_propose_records_kinds():
    task, props = _initial("layernorm_fp32")
    rw = BuiltinRewriter()
    got = rw.propose(_ctx(task, props[0].candidate), n=100, cost="cheap", rng=random.Random(3))
    kinds = {p.move.kind for p in got}
    assert kinds == {"strategy", "tunable"}
    assert not any(p.move.kind == "tunable" and p.move.params["name"] == "strategy" for p in got)
    assert len({p.candidate.sha256 for p in got}) == len(got)


@pytest.mark.parametrize(("value", "key", "knob", "direction"), [
    (128, "hint.vector_width", "vec_bits", +1),
    (12, "hint.spills", "vals_per_thread", -1),
    ("registers", "hint.occupancy", "vals_per_thread", -1),
    ("long_scoreboard", "hint.stall", "vals_per_thread", +1),
])
def test_profiler_hints_are_offered_first(value, key, knob, direction):
    task, props = _initial("layernorm_fp32")
    code = set_tunable(props[0].candidate.code, "vec_bits", 64)
    # the rule keys on the finding's key and value: its wording may change freely
    findings = (Finding("stage1.bottleneck", "memory", "stage 1: memory-bound"),
                Finding(key, value, "any wording at all"))
    ctx = _ctx(task, CandidateSource(code), findings=findings)
    assert [r.key for r in hint_rules(ctx.findings)][:1] == [key]
    rw = BuiltinRewriter()
    for seed in range(5):  # whatever the shuffle, the hinted move comes first
        first = rw.propose(ctx, n=3, cost="cheap", rng=random.Random(seed))[0]
        assert first.move.params.get("hint") == key and first.move.params["name"] == knob
        t = parse_tunables(code)[knob]
        step = sorted(t.choices)
        assert step.index(first.move.params["to"]) == step.index(t.value) + direction


def test_one_load_in_flight_unrolls_a_strided_walk_first():
    task, props = _initial("sum_dim1_fp32")
    code = props[0].candidate.code
    findings = (Finding("hint.loads_in_flight", 1, "any wording"),)
    ctx = _ctx(task, CandidateSource(code), findings=findings)
    for seed in range(3):
        first = BuiltinRewriter().propose(ctx, n=3, cost="cheap", rng=random.Random(seed))[0]
        assert first.move.params.get("hint") == "hint.loads_in_flight"
        assert first.move.params["name"] == "s_unroll"
        assert first.move.params["to"] > parse_tunables(code)["s_unroll"].value


def test_fuse_hint_prefers_fusing():
    task, props = _initial("t/softmax_scale_bias_bf16")
    ctx = _ctx(task, props[-1].candidate, findings=(Finding("hint.fuse_kernels", 3.0, "fuse"),))
    first = BuiltinRewriter().propose(ctx, n=2, cost="cheap", rng=random.Random(0))[0]
    assert first.move.kind == "fuse" and first.move.params == {"fuse": True,
                                                                "hint": "hint.fuse_kernels"}


def test_a_host_bound_parent_is_fused_first():
    # the evaluator's busy time: the GPU waited on the host between the parent's launches
    from cutegen.codegen.evaluation import Evaluation, Stage, Timing, Verdict

    task, props = _initial("t/softmax_scale_bias_bf16")

    def ev(busy):
        return Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                          verdict=Verdict.CORRECT, timing=Timing.from_samples([100.0] * 3),
                          busy_us=busy)

    waited = _ctx(task, props[-1].candidate, evaluation=ev(40.0))
    first = BuiltinRewriter().propose(waited, n=2, cost="cheap", rng=random.Random(0))[0]
    assert first.move.kind == "fuse" and first.move.params == {"fuse": True,
                                                                "hint": "evaluation.host_bound"}
    busy = _ctx(task, props[-1].candidate, evaluation=ev(95.0))
    fuse = next(p for p in family_moves(busy) if p.move.kind == "fuse")
    assert "hint" not in fuse.move.params


def test_hint_rules_are_well_formed():
    assert {r.key for r in HINT_RULES} >= {"hint.vector_width", "hint.spills",
                                           "hint.fuse_kernels"}
    assert hint_rules((Finding("sass.ldg_max_bits", 64, "nothing to act on"),)) == []
    # launching that costs more than the kernels run asks for fewer launches: the fuse move
    assert hint_rules((Finding("hint.launch_overhead", 566.0, "launching costs"),))[0].fuse
    # a reworded summary changes nothing: only the key and value are read
    assert hint_rules((Finding("hint.spills", 3, "reworded freely"),))[0].key == "hint.spills"


def test_moves_of_a_non_family_parent_are_none():
    task = _task("softmax_bf16")
    seed = BuiltinRewriter().seeds("softmax_bf16")[0].candidate
    assert list(family_moves(_ctx(task, seed))) == []


def test_a_constructor_that_cannot_be_copied_is_reported(tmp_path):
    p = tmp_path / "helper_task.py"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Scale(nn.Module):\n"
                 "    def forward(self, x):\n        return x\n\n"
                 "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                 "        self.s = Scale()\n\n    def forward(self, x):\n"
                 "        return torch.softmax(x, dim=-1)\n\n"
                 "def get_inputs():\n    return [torch.randn(4, 64)]\n\n"
                 "def get_init_inputs():\n    return []\n")
    task = load_task_file(p)
    recognition_for(task, in_process=True)
    rw = BuiltinRewriter()
    assert rw.initial(RewriteContext(task=task), n=8, rng=random.Random(0)) == []
    assert "Scale" in rw.not_covered(task)


@pytest.mark.parametrize("name, offered", [
    ("gelu_tanh_bf16", True), ("silu_bf16", True), ("gelu_scale_bias_bf16", True),
    ("gelu_scale_bias_fp32", False),  # fp32 results: tanh.approx is outside 1e-4
    ("relu_bf16", False), ("softmax_bf16", False),  # nothing transcendental in a chain
    ("kl_div_bf16", True),  # a row reduction with four strategies: fast math still second
])
def test_fast_math_is_a_knob_only_for_half_results_with_transcendentals(name, offered):
    _, props = _initial(name)
    default = parse_tunables(props[0].candidate.code)
    assert ("fast_math" in default) is offered
    assert '_FAST_MATH = bool(TUNABLES.get("fast_math", False))' in props[0].candidate.code
    fast = [p for p in props if p.move.params.get("fast_math")]
    if not offered:
        assert not fast
        return
    assert default["fast_math"].value is False and list(default["fast_math"].choices) == [
        False, True]
    # offered at the root right after the default (kl_div_bf16 2.4x faster with it on the
    # H200), so a 2-evaluation search reaches it
    assert len(fast) == 1 and props.index(fast[0]) == 1, [p.move.description for p in props]
    tun = parse_tunables(fast[0].candidate.code)
    assert tun["fast_math"].value is True
    assert {k: t.value for k, t in tun.items() if k != "fast_math"} == {
        k: t.value for k, t in default.items() if k != "fast_math"}
    assert "fast math" in fast[0].move.description


def test_the_chain_reads_the_fast_math_flag_at_each_transcendental():
    from cutegen.codegen.families.plan import Chain, PwNode
    from cutegen.codegen.families.pointwise import chain_function, fast_math_applies

    chain = Chain((PwNode(0, "gelu", ("@x",), (("approximate", "tanh"),)),
                   PwNode(1, "sigmoid", ("%0",)), PwNode(2, "erf", ("%1",)),
                   PwNode(3, "add", ("%2", "1.0"))), "%3")
    src = chain_function("_f", chain, {"x": "v[0]"})
    assert src.count("fastmath=_FAST_MATH") == 3  # tanh, exp, erf
    assert fast_math_applies("bfloat16", chain) and fast_math_applies("float16", chain)
    assert not fast_math_applies("float32", chain)
    plain = Chain((PwNode(0, "relu", ("@x",)), PwNode(1, "mul", ("%0", "2.0"))), "%1")
    assert not fast_math_applies("bfloat16", plain)
    assert "_FAST_MATH" not in chain_function("_g", plain, {"x": "v[0]"})
