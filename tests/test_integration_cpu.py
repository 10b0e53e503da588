"""End to end on a CPU machine, with the real pieces: the CLI, the SQLite store, the
process-isolated evaluator in compile-only mode, the real `openai` client against the
loopback server, and the built-in sass profiler.

A mixed search whose LLM answers are scripted (some valid CuTe DSL, some broken) must
record every call with its cost, evaluate the LLM's candidates, profile successful nodes
at the configured depth, and stop cleanly at its dollar cap.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cutegen._loopback_llm import LoopbackLLMServer, fenced, reply
from cutegen.search.storage import SqliteStorage

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parent / "data"


def _render(**twist: str) -> str:
    spec = importlib.util.spec_from_file_location(
        "fixtures", Path(__file__).resolve().parent / "codegen_tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod.render(**twist)


def _cli():
    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    return cli


def test_mixed_search_with_llm_profiling_and_dollar_cap(tmp_path, monkeypatch):
    seed = tmp_path / "seed.py"
    seed.write_text(_render())
    good = [_render(kernel_extra=f"    # llm variant {i}") for i in range(6)]
    broken = _render(kernel_store="tO[i] = cute.no_such_function(tX[i])")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a cold compile cache
    db = tmp_path / "s.db"
    with LoopbackLLMServer() as srv:
        answers = []
        for i, g in enumerate(good):
            answers += [reply(fenced(g)), reply(fenced(broken)), reply(fenced(g + f"\n# r{i}\n"))]
        srv.push(*answers)
        r = CliRunner().invoke(_cli(), [
            "search", str(DATA / "tasks" / "scale_shift.py"), "--seed-candidate", str(seed),
            "--compile-only", "--db", str(db), "--run", "mix", "--max-evals", "30",
            "--rewriter", "mixed", "--model", "scripted", "--base-url", srv.base_url,
            "--price", "scripted=1000/1000", "--max-tokens", "2000", "--max-dollars", "12",
            "--profiling", "force", "--profilers", "sass"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        print(r.output)
        assert "dollar cap" in r.output
    s = SqliteStorage(db)
    run = s.get_run("mix")
    calls = s.get_llm_calls(run.id)
    assert calls and all(c.cost_usd > 0 for c in calls)
    assert s.llm_spent_usd(run.id) <= 12.0
    nodes = s.get_nodes(run.id)
    kinds = {n.move.kind for n in nodes}
    assert {"seed", "llm_rewrite"} <= kinds or {"seed", "llm_initial"} <= kinds, kinds
    verdicts = {s.get_evaluation(n.id).verdict.value for n in nodes if n.state.is_finished()}
    assert "compiled" in verdicts
    profiled = [p for n in nodes for p in s.get_profiles(n.id) if p.profiler == "sass"]
    assert profiled and profiled[0].status == "ok"
    assert any("128-bit" in g or "vector" in g for p in profiled for g in p.guidance)
    s.close()
    out = CliRunner().invoke(_cli(), ["status", "mix", "--db", str(db), "--json"])
    assert json.loads(out.output)["evaluations"] == len([n for n in nodes if n.state.is_finished()])
