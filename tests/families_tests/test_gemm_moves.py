"""The built-in rewriter on gemm-family candidates: initial variants, one knob at a time within
TUNABLE_CHOICES, precision only to modes the task's tolerance allows, profiler hints, and
every move recorded with what it changed."""

import random
from pathlib import Path

import pytest

pytest.importorskip("cutegen.codegen.families.gemm")

from cutegen.codegen.candidate import CandidateSource, parse_tunables, set_tunable  # noqa: E402
from cutegen.codegen.families.moves import (  # noqa: E402
    GEMM_HINT_RULES,
    allowed_precisions,
    family_moves,
    read_family,
    recognition_for,
)
from cutegen.codegen.rewriters.base import RewriteContext  # noqa: E402
from cutegen.codegen.rewriters.builtin import BuiltinRewriter  # noqa: E402
from cutegen.codegen.tasks import load_bundled_task, load_task_file  # noqa: E402
from cutegen.profilers import Finding  # noqa: E402

GEMM_TASKS = Path(__file__).with_name("gemm_tasks")


def _task(name):
    """A bundled task, or one of gemm_tasks/ as "g/<name>"."""
    t = load_task_file(GEMM_TASKS / f"{name[2:]}.py") if name.startswith("g/") else (
        load_bundled_task(name))
    recognition_for(t, in_process=True)  # fill the cache without a child process
    return t


def _initial(name):
    task = _task(name)
    props = BuiltinRewriter().initial(RewriteContext(task=task), n=8, rng=random.Random(0))
    return task, [p for p in props if p.move.kind == "family"]


def _changed(parent: str, child: str) -> dict:
    a, b = parse_tunables(parent), parse_tunables(child)
    assert set(a) == set(b)
    return {k: (a[k].value, b[k].value) for k in a if a[k].value != b[k].value}


def test_initial_gemm_candidates():
    _, props = _initial("gemm_bias_relu_bf16")
    assert props and props[0].move.params == {"family": "gemm", "op": "matmul",
                                              "variant": "default"}
    default = props[0].candidate.code
    assert read_family(default) == {"family": "gemm", "op": "matmul", "fused": True}
    for p in props[1:]:
        change = {k: v for k, v in p.move.params.items()
                  if k not in ("family", "op", "variant")}
        assert change and {k: new for k, (_, new) in _changed(default, p.candidate.code).items()
                           } == change
    assert len({p.candidate.sha256 for p in props}) == len(props)
    assert all(p.candidate.origin.startswith("family:gemm family") for p in props)


@pytest.mark.parametrize("name", ["gemm_bf16", "gemm_fp32", "bmm_bf16", "gemm_swish_bf16",
                                  "g/rec_linear_logsumexp_fp32"])
def test_moves_change_one_knob_within_its_choices(name):
    task, props = _initial(name)
    parent = props[0].candidate
    tun = parse_tunables(parent.code)
    moves = list(family_moves(RewriteContext(task=task, parent=parent)))
    assert moves
    for p in moves:
        assert p.move.kind in ("tunable", "precision") and p.move.cost == "cheap"
        knob = p.move.params["name"]
        assert p.move.params["family"] == "gemm"
        expected = {knob: (p.move.params["from"], p.move.params["to"])}
        if "promote" in p.move.params:  # a move to 3xtf32 turns promotion on with it
            expected["promote"] = (0, p.move.params["promote"])
        assert _changed(parent.code, p.candidate.code) == expected
        assert p.move.params["to"] in tun[knob].choices
        assert (p.move.kind == "precision") == (knob == "precision")
        assert knob in p.move.description
    assert len({p.move.key for p in moves}) == len(moves)
    # every other allowed value of every knob but precision is offered
    offered = {(p.move.params["name"], p.move.params["to"]) for p in moves}
    for knob, t in tun.items():
        if knob != "precision":
            assert {(knob, v) for v in t.choices if v != t.value} <= offered
    # no strategy switches or fuse moves for a gemm parent
    assert not any(p.move.kind in ("strategy", "fuse") for p in moves)


@pytest.mark.parametrize(("name", "modes", "start"), [
    ("gemm_bf16", ("bf16",), "bf16"), ("gemm_fp32", ("3xtf32",), "3xtf32"),
    ("gemm_bias_relu_fp32", ("3xtf32",), "3xtf32"),
    ("g/rec_flinear_bias_silu_fp16", ("fp16",), "fp16"),
    # a loose tolerance admits TF32, but the task verifies "large" inputs: 3xTF32 leads
    ("g/rec_linear_logsumexp_fp32", ("3xtf32", "tf32"), "3xtf32"),
    ("g/matmul_tf32", ("3xtf32", "tf32"), "tf32")])  # no "large" inputs: TF32 leads
def test_precision_follows_the_tolerance(name, modes, start):
    task, props = _initial(name)
    assert allowed_precisions(task) == modes
    parent = props[0].candidate
    assert parse_tunables(parent.code)["precision"].value == start
    got = BuiltinRewriter().propose(RewriteContext(task=task, parent=parent), n=1000,
                                    cost="cheap", rng=random.Random(0))
    precision = [p for p in got if "precision" in _changed(parent.code, p.candidate.code)]
    assert {p.move.params["to"] for p in precision} == set(modes) - {start}
    assert all(p.move.kind == "precision" for p in precision)
    # the PRECISION declaration (what the Evaluation records) follows the knob, and 3xTF32
    # comes with promoted accumulators (it is not fp32-accurate without them on the H200)
    for p in precision:
        assert f"\nPRECISION = {p.move.params['to']!r}\n" in p.candidate.code
        if p.move.params["to"] == "3xtf32":
            assert parse_tunables(p.candidate.code)["promote"].value > 0


def test_a_widened_precision_choice_is_never_taken_for_a_strict_fp32_task():
    """Even a parent whose TUNABLE_CHOICES offer plain TF32 (an edited file) never moves to it
    when the task keeps the default 1e-4 tolerance: neither the family moves nor the generic
    one-tunable moves change precision beyond what the tolerance allows."""
    task, props = _initial("gemm_fp32")
    code = props[0].candidate.code
    assert code.count("'precision': ['3xtf32']") == 1
    widened = CandidateSource(code.replace("'precision': ['3xtf32']",
                                           "'precision': ['3xtf32', 'tf32']"))
    assert parse_tunables(widened.code)["precision"].choices == ("3xtf32", "tf32")
    got = BuiltinRewriter().propose(RewriteContext(task=task, parent=widened), n=1000,
                                    cost="cheap", rng=random.Random(1))
    assert got and not any(parse_tunables(p.candidate.code)["precision"].value == "tf32"
                           for p in got)


@pytest.mark.parametrize(("value", "key", "knob", "direction"), [
    ("shared_memory", "hint.occupancy", "stages", -1),
    (41.0, "hint.tensor_pipe", "stages", +1),
    ("long_scoreboard", "hint.stall", "stages", +1),
    (12, "hint.spills", "tile_n", -1),
])
def test_gemm_profiler_hints_are_offered_first(value, key, knob, direction):
    task, props = _initial("gemm_bf16")
    code = set_tunable(props[0].candidate.code, "stages", 4)
    ctx = RewriteContext(task=task, parent=CandidateSource(code),
                         findings=(Finding("stage1.bottleneck", "compute", "compute-bound"),
                                   Finding(key, value, "any wording")))
    for seed in range(2):  # whatever the shuffle, the hinted move comes first
        first = BuiltinRewriter().propose(ctx, n=3, cost="cheap", rng=random.Random(seed))[0]
        assert first.move.params.get("hint") == key and first.move.params["name"] == knob
        t = parse_tunables(code)[knob]
        ordered = sorted(t.choices)
        assert ordered.index(first.move.params["to"]) == ordered.index(t.value) + direction


@pytest.mark.parametrize("finding", [
    Finding("hint.tensor_cores", "wgmma", "matmul uses HMMA (mma.sync): use WGMMA"),
    Finding("hint.vector_width", 128, "use 128-bit vectorized copies"),
    Finding("hint.occupancy", "registers", "occupancy limited by registers"),
])
def test_findings_that_do_not_apply_to_the_gemm_template_ask_for_nothing(finding):
    task, props = _initial("gemm_bf16")
    ctx = RewriteContext(task=task, parent=props[0].candidate, findings=(finding,))
    assert not any("hint" in p.move.params for p in family_moves(ctx))


def test_gemm_hint_rules_only_step_gemm_knobs():
    from cutegen.codegen.families.gemm import gemm_knobs

    _, props = _initial("gemm_bf16")
    knobs = set(parse_tunables(props[0].candidate.code))
    assert callable(gemm_knobs)
    for rule in GEMM_HINT_RULES:
        assert rule.steps and not rule.fuse
        assert {name for name, _ in rule.steps} <= knobs, rule


def test_a_stepped_knob_at_its_end_is_not_offered():
    task, props = _initial("gemm_bf16")
    t = parse_tunables(props[0].candidate.code)["stages"]
    code = set_tunable(props[0].candidate.code, "stages", min(t.choices))
    ctx = RewriteContext(task=task, parent=CandidateSource(code),
                         findings=(Finding("hint.occupancy", "shared_memory", "smem"),))
    assert not any(p.move.params.get("hint") for p in family_moves(ctx))


def test_fast_math_variant_for_an_epilogue_with_a_transcendental():
    """Swish's sigmoid (exp) in a bf16 result: the third initial candidate is the default with
    fast math (after cluster 2x1: the H200 bench had it best or within 1% on 11 of 12
    GEMMs); a ReLU epilogue or an fp32 result offers no such knob."""
    _, props = _initial("gemm_swish_bf16")
    labels = [p.move.params["variant"] for p in props]
    assert labels[:3] == ["default", "cluster 2x1", "fast math"], labels
    assert _changed(props[0].candidate.code, props[2].candidate.code) == {
        "fast_math": (False, True)}
    for name in ("gemm_bias_relu_bf16", "gemm_fp32", "gemm_bias_relu_fp32"):
        _, props = _initial(name)
        assert "fast_math" not in parse_tunables(props[0].candidate.code), name
        assert "fast math" not in [p.move.params["variant"] for p in props], name
    _, props = _initial("gemm_bias_relu_bf16")
    assert [p.move.params["variant"] for p in props] == [
        "default", "cluster 2x1", "raster n, swizzle 4", "tile_n 128"]


def test_fp32_tile_n_follows_the_output_width():
    """The fp32 default tile_n is 192 but where its tiles would pad N a fifth more than
    128's: a 256-wide output (KernelBench L1 6) is two 192-wide tiles, the second two thirds
    zeros; the long-K task renders with 128, the bundled 1024-wide ones keep 192."""
    from cutegen.codegen.families.gemm import fp32_tile_n, gemm_knobs

    assert [fp32_tile_n(n) for n in (None, 64, 100, 256, 512, 1000, 4096, 8192, 5921)] == [
        192, 128, 128, 128, 192, 192, 192, 192, 192]
    task = _task("g/matmul_long_k_fp32")
    assert gemm_knobs(recognition_for(task).plans[0])[0]["tile_n"] == 128
    task = _task("gemm_fp32")
    assert gemm_knobs(recognition_for(task).plans[0])[0]["tile_n"] == 192
