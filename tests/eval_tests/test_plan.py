"""The call plan (pure): what each call counts for is drawn in the parent."""

from __future__ import annotations

import secrets

import pytest

from cutegen.codegen.eval.plan import NAN_BYTE, ShapeInfo, benchmark_plan, verification_plan
from cutegen.codegen.inputs import DISTRIBUTIONS, load_distribution, timing_distribution

DISTS = ("randn", "randn_mean3", "uniform", "large", "small", "negative")


def test_verification_plan_covers_distributions_hidden_shapes_and_determinism():
    rng = secrets.SystemRandom()
    shapes = [ShapeInfo("main"), ShapeInfo("batch_size=1"), ShapeInfo("batch_size=127")]
    calls = verification_plan(shapes, DISTS, main_trials=3, rng=rng)
    assert [c.k for c in calls] == list(range(len(calls)))
    main = [c for c in calls if c.role == "verify" and c.shape == 0]
    # three drawn main trials, then one for the distribution the hidden shapes left out
    assert len(main) == 4 and main[0].dist == "randn" and len({c.dist for c in main}) == 4
    assert {c.shape for c in calls if c.role == "verify"} == {0, 1, 2}
    det = calls[-1]
    assert det.role == "determinism" and det.seed == calls[0].seed and det.dist == calls[0].dist
    assert det.pattern != calls[0].pattern
    assert all(c.compare_now for c in calls)
    assert len({c.seed for c in calls[:-1]}) == len(calls) - 1


def test_every_distribution_is_checked_in_every_evaluation():
    """All the task's distributions in each plan, whatever the draw: the hidden shapes take
    the ones the main trials left out, and main-shape trials the rest (KernelBench L1 86 was
    wrong in the evaluations that drew "large", correct in the others)."""
    rng = secrets.SystemRandom()
    three = [ShapeInfo("main"), ShapeInfo("batch_size=1"), ShapeInfo("batch_size=17")]
    for shapes, dists, extra in ((three, DISTS, 1), (three[:1], DISTS, 3),
                                 (three, DISTS[:4], 0), (three, ("randn", "uniform"), 0)):
        for _ in range(20):
            calls = verification_plan(shapes, dists, main_trials=3, rng=rng)
            verify = [c for c in calls if c.role == "verify"]
            assert {c.dist for c in verify} == set(dists)
            assert len(verify) == 3 + len(shapes) - 1 + extra
            assert {c.shape for c in verify} == set(range(len(shapes)))
            assert calls[0].dist == "randn" and calls[-1].role == "determinism"
    # the order stays a draw: which hidden shape takes which left-out distribution varies
    seen = {tuple(c.dist for c in verification_plan(three, DISTS, main_trials=3, rng=rng)[3:5])
            for _ in range(40)}
    assert len(seen) > 3


def test_benchmark_plan_keeps_a_secret_subset_and_one_ghost():
    rng = secrets.SystemRandom()
    calls = benchmark_plan(10, warmup=3, runs=50, keep_slots=20, ghost=True, rng=rng)
    assert [c.k for c in calls] == list(range(10, 10 + 54))
    assert sum(c.timed for c in calls) == 50
    assert [c.role for c in calls[:3]] == ["warmup"] * 3
    assert sum(c.role == "ghost" for c in calls) == 1
    kept = [c for c in calls if c.keep]
    assert len(kept) == 10 and all(c.role in ("warmup", "timed") for c in kept)
    assert all(c.dist == "randn" and c.shape == 0 for c in calls)
    assert {c.pattern for c in calls if c.k % 2 == 0} == {NAN_BYTE}
    first = verification_plan([ShapeInfo("main")], DISTS, main_trials=3, rng=rng)[0]
    ghost = next(c for c in benchmark_plan(4, warmup=3, runs=50, keep_slots=8, ghost=True,
                                           rng=rng, ghost_of=first) if c.role == "ghost")
    assert (ghost.seed, ghost.dist) == (first.seed, first.dist)  # held against its output


def test_spiky_inputs_are_always_checked_on_the_main_shape():
    """A kernel that reduces part of a large input does it at the main shape (the hidden
    ones are smaller): the spikes it would miss must be drawn there, in every evaluation."""
    rng = secrets.SystemRandom()
    shapes = [ShapeInfo("main"), ShapeInfo("batch_size=1"), ShapeInfo("batch_size=17")]
    for _ in range(30):
        calls = verification_plan(shapes, DISTRIBUTIONS, main_trials=3, rng=rng)
        assert [c.dist for c in calls[:2]] == ["randn", "spiky"]
        assert all(c.shape == 0 for c in calls[:3])
        assert {c.dist for c in calls} == set(DISTRIBUTIONS)
    assert verification_plan(shapes, ("uniform", "spiky"), main_trials=3, rng=rng)[0].dist == \
        "spiky"
    # a task of positive inputs: the positive spikes take the place (Reference.informative)
    plan = verification_plan(shapes, ("uniform", "uniform_spiky"), main_trials=3, rng=rng)
    assert plan[0].dist == "uniform_spiky" and plan[0].shape == 0


def test_timed_calls_draw_from_a_distribution_the_task_allows():
    """Before: the warm-up and timed calls (and the baselines) drew ``randn`` whatever the task
    allowed, so a task of probabilities (``INPUT_DISTRIBUTIONS = ["uniform"]``, the bundled
    kl_div) was timed on ``log`` of negative numbers, every output NaN, and the kept calls'
    comparisons passed a kernel that wrote NaN."""
    assert timing_distribution(["uniform"]) == "uniform"
    assert timing_distribution(["negative", "uniform"]) == "negative"
    assert timing_distribution(["large", "randn"]) == "randn"
    with pytest.raises(ValueError):
        timing_distribution([])
    # the reference worker's own runs at load, before it knows which tell kernels apart
    assert load_distribution(DISTRIBUTIONS) == "randn"
    assert load_distribution(["uniform", "randn"]) == "randn"
    assert load_distribution(["uniform"]) == "uniform"
    rng = secrets.SystemRandom()
    first = verification_plan([ShapeInfo("main")], ["uniform"], main_trials=2, rng=rng)[0]
    calls = benchmark_plan(3, warmup=3, runs=20, keep_slots=4, ghost=True, rng=rng,
                           ghost_of=first, dist="uniform")
    assert {c.dist for c in calls} == {"uniform"}
    assert all(c.label.startswith("main/uniform/") for c in calls)


def test_kept_subsets_differ_between_plans_and_respect_the_slot_budget():
    rng = secrets.SystemRandom()
    draws = {tuple(c.k for c in benchmark_plan(0, warmup=3, runs=50, keep_slots=8, ghost=False,
                                                rng=rng) if c.keep) for _ in range(20)}
    assert len(draws) > 10
    calls = benchmark_plan(0, warmup=3, runs=50, keep_slots=2, ghost=False, rng=rng)
    assert sum(c.keep for c in calls) == 2
    assert not any(c.keep for c in benchmark_plan(0, warmup=3, runs=50, keep_slots=0,
                                                  ghost=False, rng=rng))


def test_calls_without_a_slot_are_compared_at_once():
    # Fewer slots than calls to check (a task with GBs of outputs) checked fewer timed calls
    # before: one of ten on an 80 GB H100 for a 6.4 GB softmax, none where not even one copy
    # fitted in a quarter of the free memory. The rest are now compared right after their call.
    rng = secrets.SystemRandom()
    for slots, kept in ((20, 10), (2, 2), (0, 0)):
        calls = benchmark_plan(0, warmup=3, runs=50, keep_slots=slots, ghost=True, rng=rng)
        assert sum(c.keep for c in calls) == kept
        assert sum(c.check for c in calls) == 10 - kept
        assert not any(c.keep and c.check for c in calls)
        assert all(c.role in ("warmup", "timed") for c in calls if c.keep or c.check)
        assert not any(c.compare_now for c in calls if c.check)


def test_timed_calls_draw_spikes_where_the_task_keeps_them():
    """The adaptive half-a-loss attack: a kernel that reduces half of a 2^30-value input and
    reads the other half only where the first holds a spike passes the spiky verification
    call, and its half is within fp32's tolerance on randn; timed (and its timed subset
    checked) on randn, it was timed doing half the work. Timed on spikes, it must read all
    of it in the calls that set its time, or be wrong in the checked ones. Before: randn."""
    assert timing_distribution(DISTRIBUTIONS) == "spiky"
    assert timing_distribution(["randn", "uniform", "uniform_spiky"]) == "uniform_spiky"
    # "spiky" left out (NaN everywhere on it) and "uniform" kept: its positive spikes
    assert timing_distribution(["uniform", "randn", "uniform_spiky"]) == "uniform_spiky"
    rng = secrets.SystemRandom()
    first = verification_plan([ShapeInfo("main")], DISTRIBUTIONS, main_trials=3, rng=rng)[0]
    calls = benchmark_plan(4, warmup=3, runs=30, keep_slots=2, ghost=True, rng=rng,
                           ghost_of=first, dist=timing_distribution(DISTRIBUTIONS))
    checked = [c for c in calls if c.keep or c.check]
    assert checked and all(c.dist == "spiky" for c in checked)
    assert {c.dist for c in calls if c.role in ("warmup", "timed")} == {"spiky"}
    assert next(c for c in calls if c.role == "ghost").dist == first.dist  # its inputs


class _DictCache:
    def __init__(self, entries: dict) -> None:
        self.entries = entries

    def get(self, task: str, fp: str):
        got = self.entries.get((task, fp))
        return dict(got) if got is not None else None

    def put(self, task: str, fp: str, value: dict) -> None:
        self.entries[(task, fp)] = dict(value)


class _RefCalls:
    def __init__(self, reply: dict) -> None:
        self.reply, self.calls = reply, 0

    def call(self, req: dict, timeout: float) -> dict:
        assert req["op"] == "baselines"
        self.calls += 1
        return dict(self.reply)


def test_baselines_kept_before_eager_in_tf32_are_timed_again_once(monkeypatch):
    """A task's cached baselines from before eager was timed with cuDNN in TF32 too (no
    ``tf32_checked``) are timed again, and the new entry (with eager_tf32) is what the next
    evaluator uses without timing; the evaluator hands eager_tf32 out as a Timing."""
    from types import SimpleNamespace

    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.eval import evaluator as ev_mod

    monkeypatch.setattr(ev_mod, "fingerprint", lambda: "fp")

    def evaluator(cache, ref):
        ev = object.__new__(ev_mod.LocalEvaluator)
        ev.task = SimpleNamespace(sha256="task")
        ev.options, ev.mode, ev.baseline_cache = EvalOptions(), "gpu", cache
        ev.ref, ev._baselines = ref, None
        ev._reference = lambda: {"distributions": ["randn", "spiky"]}
        return ev

    old = {"eager": [10.0, 11.0], "compiled": [9.0], "method": "observer", "dist": "spiky"}
    cache = _DictCache({("task", "fp"): old})
    ref = _RefCalls({"eager": [10.0, 12.0], "compiled": [9.0], "eager_tf32": [4.0, 5.0],
                     "tf32_ops": ["conv2d"]})
    ev = evaluator(cache, ref)
    eager, comp, err = ev.baselines()
    assert ref.calls == 1 and eager.median_us == 11.0 and comp and err == ""
    assert ev._eager_tf32().median_us == 4.5
    kept = cache.entries[("task", "fp")]
    assert kept["tf32_checked"] and kept["eager_tf32"] == [4.0, 5.0]
    again = _RefCalls({})
    ev2 = evaluator(cache, again)
    ev2.baselines()
    assert again.calls == 0 and ev2._eager_tf32().median_us == 4.5
    linear = _DictCache({("task", "fp"): {**old, "tf32_checked": True}})  # no cuDNN op
    ev3 = evaluator(linear, again)
    ev3.baselines()
    assert again.calls == 0 and ev3._eager_tf32() is None
