"""The newcomer's path (issue 18): what a first hour ran into, each checked here."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from cutegen.codegen.evaluation import Evaluation, Stage, Verdict

TRACEBACK = ("Traceback (most recent call last):\n"
             '  File "/home/me/cand.py", line 12, in kernel\n'
             "    x = cute.make_tensor(a, b)\n"
             "DSLUserCodeError: make_tensor() got an unexpected layout")


def _compile_error() -> Evaluation:
    return Evaluation("c" * 64, "t" * 64, Stage.COMPILE, Verdict.COMPILE_ERROR,
                      message="DSLUserCodeError: make_tensor() got an unexpected layout "
                              "(cand.py line 12)",
                      details=(TRACEBACK,), stage_seconds={"compile": 1.25, "static": 0.01},
                      log_tail="compiling kernel_cutlass_x ...")


class _Evaluator:
    def __init__(self, e: Evaluation) -> None:
        self.e = e

    def evaluate(self, cand: object) -> Evaluation:
        return self.e

    def close(self) -> None:
        pass


def test_eval_prints_its_time_table_after_the_traceback(tmp_path, monkeypatch):
    import cutegen.codegen.eval.evaluator as evaluator
    from cutegen.cli import _attach_commands, cli

    monkeypatch.setattr(evaluator, "local_evaluator", lambda *a, **k: _Evaluator(_compile_error()))
    cand = tmp_path / "cand.py"
    cand.write_text("class ModelNew: pass\n")
    _attach_commands()
    r = CliRunner().invoke(cli, ["eval", "softmax_bf16", str(cand), "--compile-only",
                                 "--run-dir", str(tmp_path / "run")])
    out = r.stdout
    assert r.exit_code == 1, r.output
    assert out.index("compile_error at stage compile: DSLUserCodeError") < out.index("Traceback")
    # the whole traceback first, then the candidate's output, then the numbers
    assert out.index("Traceback") < out.index("unexpected layout\n") < out.index("time spent")
    assert out.index("candidate output") < out.index("time spent")


def _store_with_a_failed_node(tmp_path: Path):
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.rewriters.base import Move
    from cutegen.search import NodeState
    from cutegen.search.storage import RunConfig, SqliteStorage

    store = SqliteStorage(tmp_path / "store.db")
    run = store.create_run("r1", RunConfig("toy", "toy.py", "0" * 64))
    nodes = []
    for i, (verdict, message, details) in enumerate((
            (Verdict.COMPILED, "compiled", ()),
            (Verdict.COMPILE_ERROR,  # as stored before the evaluator stripped colour codes
             "\x1b[31mDSLUserCodeError:\x1b[0m shape <4, 8> & stride mismatch",
             ("\x1b[1mTraceback\x1b[0m (most recent call last):\n  <module>\x07",)))):
        cand = CandidateSource(f"class ModelNew: pass  # {i}\n", "seed")
        node = store.add_node(run.id, parent_id=None, source=cand, move=Move("seed", f"seed {i}"))
        store.set_node_state(node.id, NodeState.RUNNING, expected=NodeState.WAITING)
        store.record_evaluation(node.id, Evaluation(cand.sha256, "0" * 64, Stage.COMPILE,
                                                    verdict, message, details=details),
                                reward=0.0)
        nodes.append(node)
    return store, run, nodes


def test_the_report_shows_stored_messages_as_plain_escaped_text(tmp_path):
    from cutegen.search.report import build_run_report, render_html

    store, run, (_, failed) = _store_with_a_failed_node(tmp_path)
    page = render_html(build_run_report(store, run, node_id=failed.id))
    store.close()
    assert "\x1b" not in page and "\x07" not in page and "[31m" not in page
    assert "DSLUserCodeError: shape &lt;4, 8&gt; &amp; stride mismatch" in page
    assert "<4, 8>" not in page and "Traceback (most recent call last)" in page


def test_the_report_lists_failed_nodes_with_their_messages(tmp_path):
    from cutegen.search.report import build_run_report, render_html

    store, run, (ok, failed) = _store_with_a_failed_node(tmp_path)
    report = build_run_report(store, run)
    page = render_html(report)
    store.close()
    assert [(f.node_id, f.verdict) for f in report.failures] == [(failed.id, "compile_error")]
    section = page[page.index("<h2>Failed nodes</h2>"):page.index("<h2>LLM</h2>")]
    assert "1 failed node(s): compile_error 1" in section
    assert f"<tr><td class='n'>{failed.id}</td>" in section and "seed 1" in section
    assert "DSLUserCodeError: shape &lt;4, 8&gt;" in section
    assert f"<tr><td class='n'>{ok.id}</td>" not in section


def _fake_nvdisasm(monkeypatch) -> list[str]:
    import cutegen.codegen.compile_cache as cc

    calls: list[str] = []

    def disassemble(cubin: Path) -> str:
        calls.append(cubin.name)
        return f"// SASS of {cubin.name}\n        /*0000*/ LDG.E.128 R0, [R2.64] ;\n"

    monkeypatch.setattr(cc, "disassemble_cubin", disassemble, raising=False)
    return calls


def test_a_compile_served_from_the_cache_has_its_sass(tmp_path, monkeypatch):
    """An entry a GPU worker stored (PTX and cubin: the DSL keeps SASS only when compiling
    compile-only) gives a compile-only evaluation served from the cache its SASS too."""
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.compile_cache import CompileCache, CompileEntry
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.tasks import resolve_task, seeds_dir

    calls = _fake_nvdisasm(monkeypatch)
    cubin, ptx = tmp_path / "k.sm_90a.cubin", tmp_path / "k.sm_90a.ptx"
    cubin.write_bytes(b"\x7fELF fake")
    ptx.write_text("// ptx")
    cache = CompileCache(tmp_path / "cache")
    cand = CandidateSource.from_path(seeds_dir() / "softmax.py")
    with LocalEvaluator(resolve_task("softmax_bf16"), EvalOptions(compile_only=True),
                        run_dir=tmp_path / "run", compile_cache=cache) as ev:
        cache.put(ev._key(cand), CompileEntry(ok=True, kernels=("k",)),
                  {cubin.name: cubin, ptx.name: ptx})
        e = ev.evaluate(cand)
    assert e.compile_cached and "k.sass" in e.artifacts, e.artifacts
    assert (tmp_path / "run" / e.artifacts["k.sass"]).read_text().startswith("// SASS of k.")
    assert calls == ["k.sm_90a.cubin"]


def test_an_older_cache_entry_gets_its_sass_once(tmp_path, monkeypatch):
    import json

    from cutegen.codegen.compile_cache import CompileCache

    calls = _fake_nvdisasm(monkeypatch)
    entry = tmp_path / "cache" / "key1"
    entry.mkdir(parents=True)
    (entry / "k.sm_90a.cubin").write_bytes(b"\x7fELF fake")
    (entry / "entry.json").write_text(json.dumps({"ok": True, "kernels": ["k"],
                                                  "files": ["k.sm_90a.cubin"]}))
    cache = CompileCache(tmp_path / "cache")
    for _ in range(2):
        got = cache.get("key1")
        assert got is not None and got.files == ("k.sm_90a.cubin", "k.sass")
    assert calls == ["k.sm_90a.cubin"]  # read twice, disassembled once
    assert (entry / "k.sass").read_text().startswith("// SASS of k.sm_90a.cubin")


def test_a_killed_searchs_scratch_folder_is_swept_by_the_next_evaluator(tmp_path):
    """kill -9 leaves the evaluator's /dev/shm/cutegen-* folder; the next one removes it."""
    import os
    import signal
    import subprocess
    import sys

    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.tasks import resolve_task

    code = ("import sys, time\n"
            "from cutegen.codegen.backend import EvalOptions\n"
            "from cutegen.codegen.eval.evaluator import LocalEvaluator\n"
            "from cutegen.codegen.tasks import resolve_task\n"
            "ev = LocalEvaluator(resolve_task('softmax_bf16'), EvalOptions(compile_only=True), "
            "run_dir=sys.argv[1])\n"
            "print(ev.scratch, flush=True)\n"
            "time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "run1")],
                             stdout=subprocess.PIPE, text=True)
    try:
        left = Path(child.stdout.readline().strip())
        assert left.name.startswith("cutegen-") and left.is_dir()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert left.is_dir()  # nothing removed it: the search was killed
    with LocalEvaluator(resolve_task("softmax_bf16"), EvalOptions(compile_only=True),
                        run_dir=tmp_path / "run2") as ev:
        assert ev.scratch.is_dir() and not left.exists()


def test_the_sweep_removes_only_what_a_dead_evaluator_of_this_host_left(tmp_path):
    import json
    import socket

    from cutegen.codegen.scratch import MARKER, make_scratch, sweep_scratch

    def folder(name: str, owner: dict | None) -> Path:
        d = tmp_path / name
        (d / "ref").mkdir(parents=True)
        if owner is not None:
            (d / MARKER).write_text(json.dumps(owner))
        return d

    host = socket.gethostname()
    dead = folder("cutegen-dead1234", {"host": host, "pid": 1 << 30, "start": 1})
    reused = folder("cutegen-reused12", {"host": host, "pid": os.getpid(), "start": -5})
    mine = make_scratch(tmp_path)
    elsewhere = folder("cutegen-other123", {"host": host + "-x", "pid": 1 << 30})
    unmarked = folder("cutegen-unmarked", None)  # not in /dev/shm: never guessed at
    bench = folder("cutegen-bench", None)
    removed = sweep_scratch([tmp_path], now=1e12)
    assert sorted(removed) == sorted([dead, reused])
    assert mine.is_dir() and elsewhere.is_dir() and unmarked.is_dir() and bench.is_dir()


def test_an_older_cutegens_unmarked_folder_in_shared_memory_goes_after_a_quiet_day(
        tmp_path, monkeypatch):
    import time

    import cutegen.codegen.scratch as scratch

    monkeypatch.setattr(scratch, "SHM", tmp_path)
    old = tmp_path / "cutegen-abcd_123"
    (old / "ref").mkdir(parents=True)
    plain = tmp_path / "cutegen-xyzw_987"  # no ref folder: not plainly an evaluator's
    plain.mkdir()
    now = time.time()
    assert scratch.sweep_scratch([tmp_path], now=now + 3600) == []  # still quiet for < a day
    assert scratch.sweep_scratch([tmp_path], now=now + 2 * 86400) == [old]
    assert plain.is_dir()
