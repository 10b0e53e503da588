"""The LLM and mixed rewriters: moves, the repair turn, F9 deduplication, focus banning,
the error policy, and routing by cost class."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cutegen._loopback_llm import SAMPLE_CANDIDATE, error, fenced, reply
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Verdict
from cutegen.codegen.prompting import focus_hints
from cutegen.codegen.rewriters import mixed
from cutegen.codegen.rewriters.base import Move, Proposal, RewriteContext, Rewriter
from cutegen.codegen.rewriters.llm import LLMRewriter, _move
from cutegen.codegen.rewriters.mixed import MixedRewriter
from cutegen.codegen.tasks import Task
from cutegen.errors import BudgetExceededError, ConfigError, LLMError

TASK = Task("toy", Path("/nonexistent/toy.py"),
            "import torch\nclass Model(torch.nn.Module):\n    pass\n"
            "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
PARENT = CandidateSource(SAMPLE_CANDIDATE.replace("256", "128"), "seed")


def variant(i: int, *, broken: bool = False) -> str:
    body = SAMPLE_CANDIDATE.replace('"threads": 256', f'"threads": {i}')
    return body + ("\nBROKEN = True\n" if broken else "")


class FakeCompiler:
    """compile_check stand-in: a candidate containing BROKEN fails with a real-looking error."""

    ERROR = "error[TYPE_UNSTABLE_JOIN]: `s` has type `Int32` on one path and `Float32`"

    def __init__(self) -> None:
        self.checked: list[str] = []

    def __call__(self, cand: CandidateSource) -> str | None:
        self.checked.append(cand.code)
        return self.ERROR if "BROKEN" in cand.code else None


def ctx(**kw) -> RewriteContext:
    return RewriteContext(task=TASK, parent=kw.pop("parent", PARENT), **kw)


def test_initial_proposals_are_llm_initial_moves_with_distinct_focus(server, make_client):
    client, rec = make_client()
    server.push(*[reply(fenced(variant(i))) for i in range(3)])
    out = LLMRewriter(client).initial(RewriteContext(task=TASK), n=3, rng=random.Random(0))
    assert len(out) == 3
    assert {p.move.kind for p in out} == {"llm_initial"}
    assert all(p.move.cost == "expensive" for p in out)
    assert len({p.move.params["focus"] for p in out}) == 3
    assert all(p.candidate.origin.startswith("llm:fake-model:llm_initial:") for p in out)
    assert {c.purpose for c in rec.calls} == {"initial"}
    assert {c.candidate_sha256 for c in rec.calls} == {p.candidate.sha256 for p in out}


def test_rewrite_prompt_reaches_the_server_with_the_parent_and_its_evaluation(server,
                                                                              make_client):
    client, rec = make_client()
    server.push(reply(fenced(variant(512))))
    ev = Evaluation(PARENT.sha256, TASK.sha256, Stage.VERIFY, Verdict.WRONG,
                    message="1 of 3 trials failed")
    (p,) = LLMRewriter(client).propose(ctx(evaluation=ev), n=1, cost="expensive",
                                       rng=random.Random(0))
    assert p.move.kind == "llm_rewrite" and p.move.params["focus"] == "fix"  # parent failed
    user = server.requests[0].body["messages"][1]["content"]
    assert PARENT.code.strip() in user and "1 of 3 trials failed" in user
    assert rec.calls[0].parent_sha256 == PARENT.sha256


def test_the_llm_has_no_cheap_moves(server, make_client):
    client, _ = make_client()
    assert LLMRewriter(client).propose(ctx(), n=4, cost="cheap", rng=random.Random(0)) == []
    assert server.requests == []


def test_banned_focus_hints_are_not_asked_for_again(server, make_client):
    client, _ = make_client()
    hints = focus_hints("rewrite")
    banned = frozenset(_move("llm_rewrite", h).key for h in hints[1:])
    server.push(*[reply(fenced(variant(i))) for i in range(2)])
    out = LLMRewriter(client).propose(ctx(banned_moves=banned), n=2, cost="expensive",
                                      rng=random.Random(0))
    assert {p.move.params["focus"] for p in out} == {hints[0].key}


def test_every_focus_banned_means_no_proposal_and_no_call(server, make_client):
    client, _ = make_client()
    banned = frozenset(_move("llm_rewrite", h).key for h in focus_hints("rewrite"))
    assert LLMRewriter(client).propose(ctx(banned_moves=banned), n=2, cost="expensive",
                                       rng=random.Random(0)) == []
    assert server.requests == []


# -- F9 ------------------------------------------------------------------------------------
def test_f9_duplicate_code_from_parallel_calls_is_proposed_once(server, make_client):
    client, rec = make_client()
    same = fenced(variant(7))
    server.push(reply(same), reply(same.replace("Here is", "Here, again, is")), reply(same))
    out = LLMRewriter(client).propose(ctx(), n=3, cost="expensive", rng=random.Random(0))
    assert len(out) == 1
    assert len(rec.calls) == 3 and len({c.candidate_sha256 for c in rec.calls}) == 1


def test_f9_the_parent_itself_and_already_seen_sources_are_dropped(server, make_client):
    client, _ = make_client()
    seen = CandidateSource(variant(9)).sha256
    server.push(reply(fenced(PARENT.code)), reply(fenced(variant(9))), reply(fenced(variant(3))))
    out = LLMRewriter(client).propose(ctx(seen_sources=frozenset({seen})), n=3,
                                      cost="expensive", rng=random.Random(0))
    assert [p.candidate.code for p in out] == [variant(3)]


def test_f9_duplicates_are_compiled_and_repaired_once(server, make_client):
    client, rec = make_client()
    compiler = FakeCompiler()
    broken = fenced(variant(5, broken=True))
    server.push(reply(broken), reply(broken), reply(fenced(variant(5))))
    out = LLMRewriter(client, compile_check=compiler).propose(ctx(), n=2, cost="expensive",
                                                               rng=random.Random(0))
    assert [p.candidate.code for p in out] == [variant(5)]
    assert [c.purpose for c in rec.calls] == ["rewrite", "rewrite", "repair"]
    assert len(compiler.checked) == 2  # the broken draft once, its repair once


# -- the repair turn -----------------------------------------------------------------------
def test_a_repair_turn_fixes_a_compile_error(server, make_client):
    client, rec = make_client()
    compiler = FakeCompiler()
    server.push(reply(fenced(variant(1, broken=True))), reply(fenced(variant(1))))
    (p,) = LLMRewriter(client, compile_check=compiler, repair_rounds=2).propose(
        ctx(), n=1, cost="expensive", rng=random.Random(0))
    assert p.candidate.code == variant(1) and "BROKEN" not in p.candidate.code
    assert p.move.kind == "llm_repair" and p.move.params["repairs"] == 1
    assert [c.purpose for c in rec.calls] == ["rewrite", "repair"]
    repair_prompt = server.requests[1].body["messages"][1]["content"]
    assert FakeCompiler.ERROR in repair_prompt and "BROKEN = True" in repair_prompt
    assert rec.calls[1].parent_sha256 == CandidateSource(variant(1, broken=True)).sha256
    assert len(compiler.checked) == 2


def test_repairs_are_bounded(server, make_client):
    client, rec = make_client()
    server.push(*[reply(fenced(variant(i, broken=True))) for i in range(1, 5)])
    (p,) = LLMRewriter(client, compile_check=FakeCompiler(), repair_rounds=2).propose(
        ctx(), n=1, cost="expensive", rng=random.Random(0))
    assert [c.purpose for c in rec.calls] == ["rewrite", "repair", "repair"]
    assert p.move.kind == "llm_repair" and p.move.params["repairs"] == 2
    assert "BROKEN" in p.candidate.code  # still broken: the evaluator records the failure


def test_f6_f7_unusable_replies_are_never_compiled(server, make_client):
    client, rec = make_client()
    compiler = FakeCompiler()
    server.push(reply(fenced(variant(1)), finish_reason="length"), reply("no code here"),
                reply(fenced() + fenced(variant(2))))
    out = LLMRewriter(client, compile_check=compiler).propose(ctx(), n=3, cost="expensive",
                                                               rng=random.Random(0))
    assert out == [] and compiler.checked == []
    assert sorted(c.outcome for c in rec.calls) == ["length", "parse_error", "parse_error"]


def test_compile_check_from_a_compile_only_evaluator():
    from cutegen.codegen.rewriters.llm import compile_check_from
    from cutegen.testing import FakeEvaluator

    broken = CandidateSource(variant(1))
    ev = FakeEvaluator(compile_only=True, failures={broken.sha256: Verdict.COMPILE_ERROR,
                                                    "threads=2": Verdict.WRONG})
    check = compile_check_from(ev)
    assert check(broken) == "compile_error: fake compile_error"
    assert check(CandidateSource(variant(3))) is None
    assert check(CandidateSource(variant(2))) is None  # wrong answers are not repaired


# -- error policy ---------------------------------------------------------------------------
def test_proposals_survive_one_failing_call(server, make_client):
    client, _ = make_client(concurrency=1, structured="off")
    server.push(reply(fenced(variant(1))), error(401, "bad key"))
    out = LLMRewriter(client).propose(ctx(), n=2, cost="expensive", rng=random.Random(0))
    assert len(out) == 1


def test_when_every_call_fails_the_error_reaches_the_scheduler(server, make_client):
    client, _ = make_client(structured="off")
    server.push(error(401), error(401))
    with pytest.raises(LLMError, match="HTTP 401"):
        LLMRewriter(client).propose(ctx(), n=2, cost="expensive", rng=random.Random(0))


def test_budget_cap_stops_proposals(server, make_client):
    client, rec = make_client(max_dollars=0.1, max_tokens=16_000)
    rewriter = LLMRewriter(client)
    server.push(*[reply(fenced(variant(i)), usage=None) for i in range(100)])
    made = 0
    with pytest.raises(BudgetExceededError):
        for i in range(100):
            made += len(rewriter.propose(ctx(), n=1, cost="expensive", rng=random.Random(i)))
    assert made >= 1
    assert rec.spent_usd() <= 0.1
    assert len(server.requests) == made


# -- the mixed rewriter ------------------------------------------------------------------------
class StubRewriter:
    def __init__(self, name: str, codes: list[str]) -> None:
        self.name, self.codes = name, codes
        self.calls: list[tuple[str, int, str]] = []

    def _props(self, n: int, kind: str) -> list[Proposal]:
        return [Proposal(CandidateSource(c, self.name), Move(kind, kind)) for c in self.codes[:n]]

    def initial(self, ctx, *, n, rng):
        self.calls.append(("initial", n, ""))
        return self._props(n, "seed")

    def propose(self, ctx, *, n, cost, rng):
        self.calls.append(("propose", n, cost))
        return self._props(n, cost)


def test_mixed_routes_by_cost_class():
    cheap, llm = StubRewriter("builtin", ["a", "b"]), StubRewriter("llm", ["c"])
    m = MixedRewriter(llm, cheap)
    assert isinstance(m, Rewriter) and m.name == "mixed"
    assert [p.candidate.code for p in m.propose(ctx(), n=2, cost="cheap", rng=random.Random())] \
        == ["a", "b"]
    assert [p.candidate.code for p in m.propose(ctx(), n=1, cost="expensive",
                                                rng=random.Random())] == ["c"]
    assert cheap.calls == [("propose", 2, "cheap")] and llm.calls == [("propose", 1, "expensive")]


def test_mixed_initial_takes_seeds_first_and_the_llm_fills_the_rest():
    cheap, llm = StubRewriter("builtin", ["seed"]), StubRewriter("llm", ["x", "y", "z"])
    out = MixedRewriter(llm, cheap).initial(RewriteContext(task=TASK), n=3, rng=random.Random())
    assert [p.candidate.code for p in out] == ["seed", "x", "y"]
    assert llm.calls == [("initial", 2, "")]
    full = StubRewriter("builtin", ["s1", "s2", "s3"])
    llm2 = StubRewriter("llm", ["x"])
    MixedRewriter(llm2, full).initial(RewriteContext(task=TASK), n=3, rng=random.Random())
    assert llm2.calls == []


def test_mixed_builds_the_builtin_rewriter_lazily(monkeypatch):
    built: list[int] = []

    def factory():
        built.append(1)
        return StubRewriter("builtin", ["a"])

    m = MixedRewriter(StubRewriter("llm", ["c"]), builtin_factory=factory)
    m.propose(ctx(), n=1, cost="expensive", rng=random.Random())
    assert built == []
    m.propose(ctx(), n=1, cost="cheap", rng=random.Random())
    m.propose(ctx(), n=1, cost="cheap", rng=random.Random())
    assert built == [1]
    monkeypatch.setattr(mixed, "BUILTIN", ("cutegen.codegen.rewriters.no_such_module", "X"))
    with pytest.raises(ConfigError, match="not available"):
        mixed.load_builtin()
