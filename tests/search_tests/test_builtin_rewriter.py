"""The builtin rewriter: single-tunable moves, seeds, banned and seen moves, generators."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cutegen.codegen.candidate import CandidateSource, parse_tunables
from cutegen.codegen.rewriters.base import Move, Proposal, RewriteContext, Rewriter
from cutegen.codegen.rewriters.builtin import (
    BuiltinRewriter,
    seeds_for_task,
    tunable_moves,
)
from cutegen.codegen.tasks import Task, seeds_dir
from cutegen.errors import CandidateError
from cutegen.testing import fake_candidate

SRC = fake_candidate({"vec": 4, "threads": 128, "fixed": 1},
                     {"vec": [2, 4, 8], "threads": [128, 256]})


def _ctx(task, code=SRC, **kw):
    return RewriteContext(task=task, parent=CandidateSource(code), **kw)


def test_is_a_rewriter():
    assert isinstance(BuiltinRewriter(), Rewriter)


def test_tunable_moves_change_one_value_within_choices(task):
    props = list(tunable_moves(_ctx(task)))
    assert [p.move.description for p in props] == ["threads 128->256", "vec 4->2", "vec 4->8"]
    for p in props:
        assert p.move == Move("tunable", p.move.description, "cheap", p.move.params)
        t = parse_tunables(p.candidate.code)
        name, new = p.move.params["name"], p.move.params["to"]
        assert t[name].value == new and p.move.params["from"] != new
        others = {k: v.value for k, v in t.items() if k != name}
        assert others == {k: v.value for k, v in parse_tunables(SRC).items() if k != name}


def test_candidates_without_tunables_have_no_moves(task):
    assert list(tunable_moves(_ctx(task, code="x = 1\n"))) == []
    assert list(tunable_moves(_ctx(task, code="TUNABLES = [1]\n"))) == []  # malformed: skipped


def test_propose_skips_banned_and_seen_and_wrong_cost(task):
    rw = BuiltinRewriter(bundled_seeds=False)
    all_ = rw.propose(_ctx(task), n=10, cost="cheap", rng=random.Random(0))
    assert len(all_) == 3
    seen = {all_[0].candidate.sha256}
    banned = {all_[1].move.key}
    left = rw.propose(_ctx(task, seen_sources=frozenset(seen), banned_moves=frozenset(banned)),
                      n=10, cost="cheap", rng=random.Random(0))
    assert [p.move.key for p in left] == [all_[2].move.key]
    assert rw.propose(_ctx(task), n=10, cost="expensive", rng=random.Random(0)) == []
    assert rw.propose(RewriteContext(task=task), n=10, cost="cheap", rng=random.Random(0)) == []


def test_propose_is_deterministic_given_the_rng(task):
    rw = BuiltinRewriter(bundled_seeds=False)
    a = rw.propose(_ctx(task), n=2, cost="cheap", rng=random.Random("7:3:cheap:0"))
    b = rw.propose(_ctx(task), n=2, cost="cheap", rng=random.Random("7:3:cheap:0"))
    assert [p.candidate.sha256 for p in a] == [p.candidate.sha256 for p in b] and len(a) == 2


def test_extra_move_generators(task):
    def swap_variant(ctx):
        yield Proposal(CandidateSource(ctx.parent.code + "# variant B\n"),
                       Move("family", "variant A->B", "cheap", {"variant": "B"}))
        yield Proposal(CandidateSource(ctx.parent.code + "# llm\n"),
                       Move("llm_rewrite", "rewrite", "expensive"))

    rw = BuiltinRewriter(generators=(tunable_moves, swap_variant), bundled_seeds=False)
    kinds = {p.move.kind for p in rw.propose(_ctx(task), n=10, cost="cheap",
                                             rng=random.Random(1))}
    assert kinds == {"tunable", "family"}
    assert [p.move.kind for p in rw.propose(_ctx(task), n=10, cost="expensive",
                                            rng=random.Random(1))] == ["llm_rewrite"]


def test_seed_matching(tmp_path):
    for name in ("softmax.py", "softmax_long.py", "gemm.py", "_private.py"):
        (tmp_path / name).write_text("x = 1\n")
    names = lambda t: [p.name for p in seeds_for_task(t, tmp_path)]  # noqa: E731
    assert names("softmax") == ["softmax.py"]
    assert names("softmax_fp32") == ["softmax.py"]
    assert names("softmax_long_bf16") == ["softmax.py", "softmax_long.py"]
    assert names("softmaxx_fp32") == [] and names("gemm_bias_relu_fp32") == ["gemm.py"]
    assert seeds_for_task("x", tmp_path / "missing") == []


def test_bundled_seeds_are_found():
    if not any(seeds_dir().glob("*.py")):
        pytest.skip("no bundled seeds in this checkout")
    stems = {p.stem for p in seeds_dir().glob("*.py") if not p.name.startswith("_")}
    for stem in stems:
        assert [p.stem for p in seeds_for_task(f"{stem}_fp32")][:1] == [stem]


def test_initial_gives_bundled_then_user_seeds(tmp_path, seed_file):
    folder = tmp_path / "seeds"
    folder.mkdir()
    (folder / "toy.py").write_text(SRC)
    task = Task("toy_fp32", tmp_path / "t.py", "")
    rw = BuiltinRewriter(seed_files=[seed_file], seeds_folder=folder)
    props = rw.initial(RewriteContext(task=task), n=8, rng=random.Random(0))
    assert [p.move.description for p in props] == ["seed toy.py", "seed seed.py"]
    assert all(p.move.kind == "seed" for p in props)
    assert props[0].candidate.origin == "seed:toy.py"
    seen = frozenset({props[0].candidate.sha256})
    again = rw.initial(RewriteContext(task=task, seen_sources=seen), n=8, rng=random.Random(0))
    assert [p.move.description for p in again] == ["seed seed.py"]
    assert rw.initial(RewriteContext(task=task), n=1, rng=random.Random(0)) == props[:1]


def test_missing_seed_file_fails_early(tmp_path):
    with pytest.raises(CandidateError):
        BuiltinRewriter(seed_files=[Path(tmp_path / "nope.py")])
