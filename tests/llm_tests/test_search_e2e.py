"""A whole CPU search whose nodes come from LLM answers: the real client against the
loopback server, the store's call recorder and ledger, the FakeEvaluator, and the
``export-traces`` rows built from what the store holds."""

from __future__ import annotations

import pytest

from cutegen._loopback_llm import reply
from cutegen.codegen.llm import LLMClient, LLMConfig, ModelPrice
from cutegen.codegen.llm.traces import TraceNode, trace_rows
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.rewriters.llm import LLMRewriter
from cutegen.codegen.rewriters.mixed import MixedRewriter
from cutegen.codegen.tasks import Task
from cutegen.search import Budget, Search, SearchParams
from cutegen.search.storage import InMemoryStorage, RunConfig, SqliteStorage, StoreCallRecorder
from cutegen.testing import FakeEvaluator, fake_candidate

CHOICES = {"threads": [64, 128, 256, 512], "vec": [1, 2, 4, 8]}


def llm_answer(i: int) -> str:
    """A distinct candidate per answer, with TUNABLES the built-in moves can change."""
    code = fake_candidate({"threads": [64, 128, 256, 512][i % 4], "vec": [1, 2, 4, 8][i // 4 % 4]},
                          CHOICES, note=f"llm answer {i}")
    return f"Answer {i}.\n\n```python\n{code}```\n"


@pytest.fixture(params=["inmemory", "sqlite"])
def store(request, tmp_path):
    s = InMemoryStorage() if request.param == "inmemory" else SqliteStorage(tmp_path / "s.db")
    yield s
    s.close()


@pytest.fixture
def task(tmp_path):
    p = tmp_path / "toy_fp32.py"
    src = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    p.write_text(src)
    return Task("toy_fp32", p, src)


class Tee:
    """Records into the store (the ledger) and keeps our own records for the test."""

    def __init__(self, store, run_id) -> None:
        self.store = StoreCallRecorder(store, run_id)
        self.calls: list = []

    def record(self, call) -> None:
        self.store.record(call)
        self.calls.append(call)

    def spent_usd(self) -> float:
        return self.store.spent_usd()


def make_client(server, store, run, fast_sleep, **kw) -> LLMClient:
    cfg = LLMConfig(model="fake-model", base_url=server.base_url, api_key="k",
                    price=ModelPrice(1.0, 2.0), **kw)
    return LLMClient(cfg, Tee(store, run.id), sleep=fast_sleep)


def nodes_for_traces(store, run_id):
    rewards = {r.node_id: r.reward for r in store.get_results(run_id)}
    return [TraceNode(n.id, store.get_source(n.id), store.get_evaluation(n.id), rewards.get(n.id))
            for n in store.get_nodes(run_id)]


def test_llm_only_search_on_cpu(server, store, task, fast_sleep):
    run = store.create_run("llm-e2e", RunConfig(task.name, str(task.path), task.sha256, seed=3))
    server.push(*[reply(llm_answer(i), usage=(2000, 1000)) for i in range(16)])
    client = make_client(server, store, run, fast_sleep)
    params = SearchParams(cheap=None, initial_candidates=2)
    with Search(storage=store, run=run, task=task, evaluator=FakeEvaluator(seed=1),
                rewriter=LLMRewriter(client), params=params, budget=Budget(max_evals=6),
                heartbeat=False) as search:
        summary = search.run()
    assert summary.evaluations == 6 and summary.best is not None
    nodes = store.get_nodes(run.id)
    answers = {llm_answer(i).split("```python\n")[1].split("```")[0] for i in range(16)}
    assert all(store.get_source(n.id) in answers for n in nodes)
    assert {n.move.kind for n in nodes} <= {"llm_initial", "llm_rewrite"}
    assert "llm_rewrite" in {n.move.kind for n in nodes}
    # the rewrite prompts quote the parent's evaluation
    rewrites = [r for r in server.requests
                if r.body["messages"][1]["content"].startswith("Improve")]
    assert rewrites and "Verdict: correct" in rewrites[0].body["messages"][1]["content"]
    spent = store.llm_spent_usd(run.id)
    assert spent == pytest.approx(len(server.requests) * ModelPrice(1.0, 2.0).cost(2000, 1000))
    assert summary.usage.usd == pytest.approx(spent)
    # every node made by an LLM call is joined back to its (prompt, response) for export,
    # through our records (candidate_sha256) and through the store's rows (re-extraction)
    calls = client.recorder.calls
    for records in (calls, store.get_llm_calls(run.id)):
        rows = list(trace_rows(records, nodes_for_traces(store, run.id), run=run.name))
        assert {r["node_id"] for r in rows} == {n.id for n in nodes}
        assert all(r["evaluation"] and r["prompt"] and r["candidate"] for r in rows)
        assert all(r["reward"] is not None and r["verdict"] for r in rows)


def test_mixed_search_uses_cheap_and_expensive_moves(server, store, task, fast_sleep, tmp_path):
    seed = tmp_path / "seed.py"
    seed.write_text(fake_candidate({"threads": 128, "vec": 4}, CHOICES, note="seed"))
    run = store.create_run("mixed-e2e", RunConfig(task.name, str(task.path), task.sha256, seed=5))
    server.push(*[reply(llm_answer(i)) for i in range(40)])
    client = make_client(server, store, run, fast_sleep)
    rewriter = MixedRewriter(LLMRewriter(client),
                             BuiltinRewriter(seed_files=[seed], bundled_seeds=False))
    with Search(storage=store, run=run, task=task, evaluator=FakeEvaluator(seed=2),
                rewriter=rewriter, params=SearchParams(initial_candidates=2),
                budget=Budget(max_evals=30), heartbeat=False) as search:
        summary = search.run()
    kinds = {n.move.kind for n in store.get_nodes(run.id)}
    assert "seed" in kinds and "llm_initial" in kinds  # the LLM filled the second slot
    assert kinds & {"llm_rewrite"} and kinds - {"seed", "llm_initial", "llm_rewrite"}
    assert summary.evaluations == 30
    # LLM-written candidates expose TUNABLES, so cheap built-in moves apply to them too
    by_id = {n.id: n for n in store.get_nodes(run.id)}
    assert any(n.move.cost == "cheap" and n.parent_id is not None
               and by_id[n.parent_id].move.kind.startswith("llm_") for n in by_id.values())


def test_the_dollar_cap_stops_a_search(server, store, task, fast_sleep):
    run = store.create_run("capped", RunConfig(task.name, str(task.path), task.sha256, seed=1))
    server.push(*[reply(llm_answer(i), usage=None) for i in range(20)])
    client = make_client(server, store, run, fast_sleep, max_dollars=0.12, max_tokens=16_000)
    with Search(storage=store, run=run, task=task, evaluator=FakeEvaluator(seed=1),
                rewriter=LLMRewriter(client), params=SearchParams(cheap=None,
                                                                  initial_candidates=2),
                budget=Budget(max_evals=50), heartbeat=False) as search:
        summary = search.run()
    # the cap refusing the next call is a clean stop of the run, not an error
    assert summary.status == "finished" and "dollar cap" in summary.reason
    assert store.llm_spent_usd(run.id) <= 0.12
    assert len(server.requests) == len(store.get_nodes(run.id))  # each paid answer is a node
    assert all(n.state.is_finished() for n in store.get_nodes(run.id))
