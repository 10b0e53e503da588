"""``cutegen search / resume / status / show`` with the fake evaluator."""

from __future__ import annotations

import json
import os
import signal
import time

import click
import pytest
from click.testing import CliRunner

import cutegen.api as api
import cutegen.cli.search as cli_search
from cutegen.errors import (
    ConfigError,
    DeviceLostError,
    DuplicatedRunError,
    GPURequiredError,
    InfrastructureError,
    ResumeMismatchError,
    RunNotFoundError,
    StorageError,
)
from cutegen.search.storage import SqliteStorage
from cutegen.testing import FakeEvaluator, tree_signature

TASK_SRC = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


@pytest.fixture
def cli():
    @click.group()
    def group() -> None:
        """test group"""

    cli_search.register(group)
    return group


@pytest.fixture
def made(monkeypatch):
    """Replace the real evaluator; records the options each run was started with."""
    options = []

    def make(task, settings, run_dir, storage):
        options.append(settings.eval)
        return FakeEvaluator(seed=1, compile_only=settings.eval.compile_only)

    monkeypatch.setattr(api, "make_evaluator", make)
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    return options


@pytest.fixture
def env(tmp_path, seed_file):
    task = tmp_path / "toy_fp32.py"
    task.write_text(TASK_SRC)
    return {"task": str(task), "seed": str(seed_file), "db": str(tmp_path / "s" / "c.db")}


def invoke(cli, args, **kw):
    return CliRunner().invoke(cli, args, catch_exceptions=True, **kw)


def test_commands_have_help(cli):
    for name, cmd in cli.commands.items():
        r = invoke(cli, [name, "--help"])
        assert r.exit_code == 0 and cmd.help and "Usage" in r.output


def test_search_runs_and_reports(cli, made, env, tmp_path):
    r = invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--max-evals", "12",
                     "--run", "r1", "--db", env["db"], "--seed", "4"])
    assert r.exit_code == 0, r.output
    assert "run r1: finished (evaluation budget reached (12 of 12))" in r.stdout
    assert "best: node" in r.stdout and "cutegen show r1" in r.stdout
    assert "node    1" in r.stderr and "12 evaluations" in r.stderr  # progress on stderr
    s = SqliteStorage(env["db"])
    run = s.get_run("r1")
    assert run.config.seed == 4 and run.status == "finished"
    assert run.config.settings["rewriter"] == "builtin"
    assert run.config.settings["seed_candidates"][0]["path"] == env["seed"]
    assert len(list((tmp_path / "s" / "r1" / "candidates").glob("*.py"))) == s.n_nodes(run.id)
    s.close()
    assert made[0].compile_only is False


def test_defaults_db_and_run_name(cli, made, env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--max-evals", "2",
                     "--compile-only"])
    assert r.exit_code == 0, r.output
    s = SqliteStorage(tmp_path / "runs" / "cutegen.db")
    (run,) = s.list_runs()
    assert run.name.startswith("toy_fp32-") and len(run.name) == len("toy_fp32-20250101-120000")
    s.close()
    assert made[0].compile_only is True


@pytest.mark.parametrize(("args", "error", "text"), [
    (["--rewriter", "llm"], ConfigError, "needs a model: give --model"),
    ([], ConfigError, "no seed candidate for toy_fp32"),
])
def test_search_refuses_clearly(cli, made, env, args, error, text):
    r = invoke(cli, ["search", env["task"], "--db", env["db"], *args])
    assert isinstance(r.exception, error) and text in str(r.exception)


def test_duplicate_run_name(cli, made, env):
    base = ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
            "--run", "r1", "--max-evals", "2"]
    assert invoke(cli, base).exit_code == 0
    r = invoke(cli, base)
    assert isinstance(r.exception, DuplicatedRunError) and "cutegen resume r1" in str(r.exception)


def test_kernelbench_task(cli, made, env, tmp_path):
    lvl = tmp_path / "KernelBench" / "level1"
    lvl.mkdir(parents=True)
    (lvl / "23_Softmax.py").write_text(TASK_SRC)
    r = invoke(cli, ["search", "--kernelbench", str(tmp_path), "--level", "1", "--problem", "23",
                     "--seed-candidate", env["seed"], "--db", env["db"], "--max-evals", "2",
                     "--run", "kb"])
    assert r.exit_code == 0, r.output
    s = SqliteStorage(env["db"])
    assert s.get_run("kb").config.task_name == "kb_L1_P23_Softmax"
    s.close()


class _Interrupting(FakeEvaluator):
    """Sends itself Ctrl-C during its ``at``-th evaluation (``times`` times)."""

    def __init__(self, at: int, times: int = 1, **kw) -> None:
        super().__init__(**kw)
        self.at, self.times = at, times

    def evaluate(self, candidate):
        if self.evaluations + 1 == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # let the handler run before the next press
        return super().evaluate(candidate)


def test_ctrl_c_finishes_the_evaluation_then_resume_continues(cli, env, monkeypatch, tmp_path):
    evaluators = iter([_Interrupting(at=5, seed=1), FakeEvaluator(seed=1),
                       FakeEvaluator(seed=1)])
    monkeypatch.setattr(api, "make_evaluator", lambda *a: next(evaluators))
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    base = ["--seed-candidate", env["seed"], "--max-evals", "20", "--seed", "9"]
    r = invoke(cli, ["search", env["task"], *base, "--run", "r1", "--db", env["db"]])
    assert r.exit_code == 130, r.output  # stopped by Ctrl-C: not a success, resumable
    assert "run r1: stopped" in r.stdout and "evaluations 5" in r.stdout
    assert f"cutegen resume r1 --db {env['db']}" in r.stderr
    assert "stopping after the current evaluation" in r.stderr
    r = invoke(cli, ["resume", "r1", "--db", env["db"]])
    assert r.exit_code == 0, r.output
    assert "run r1: finished" in r.stdout and "evaluations 20" in r.stdout
    ref_db = str(tmp_path / "ref.db")
    assert invoke(cli, ["search", env["task"], *base, "--run", "r1", "--db", ref_db]).exit_code == 0
    a, b = SqliteStorage(env["db"]), SqliteStorage(ref_db)
    assert tree_signature(a, 1) == tree_signature(b, 1)
    a.close()
    b.close()


def test_second_ctrl_c_aborts_and_resume_requeues(cli, env, monkeypatch):
    evaluators = iter([_Interrupting(at=3, times=2, seed=1), FakeEvaluator(seed=1)])
    monkeypatch.setattr(api, "make_evaluator", lambda *a: next(evaluators))
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    r = invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"],
                     "--max-evals", "6", "--run", "r1", "--db", env["db"]])
    assert r.exit_code != 0 and "Aborted" in r.output  # click turns KeyboardInterrupt into this
    s = SqliteStorage(env["db"])
    run = s.get_run("r1")
    assert run.status == "stopped" and len(s.get_results(run.id)) == 2
    s.close()
    r = invoke(cli, ["resume", "r1", "--db", env["db"]])
    assert r.exit_code == 0 and "evaluations 6" in r.stdout
    s = SqliteStorage(env["db"])
    assert max(n.attempts for n in s.get_nodes(run.id)) == 1  # the interrupted one, once more
    s.close()


class _MachineFails(FakeEvaluator):
    """Raises InfrastructureError at its ``at``-th evaluation (a worker that cannot start)."""

    def __init__(self, at: int, **kw) -> None:
        super().__init__(**kw)
        self.at = at

    def evaluate(self, candidate):
        if self.evaluations + 1 == self.at:
            raise InfrastructureError("a candidate worker failed to start (exit code 1)")
        return super().evaluate(candidate)


def test_a_machine_failure_says_how_to_go_on(cli, env, monkeypatch):
    """A failed machine stops the search with exit code 4; the error said only what failed,
    not that the run is kept and how to continue it."""
    evaluators = iter([_MachineFails(at=3, seed=1), FakeEvaluator(seed=1)])
    monkeypatch.setattr(api, "make_evaluator", lambda *a: next(evaluators))
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    r = invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--max-evals", "6",
                     "--run", "r1", "--db", env["db"]])
    assert isinstance(r.exception, InfrastructureError), r.output
    assert r.exception.exit_code == 4
    msg = str(r.exception)
    assert "a candidate worker failed to start" in msg
    assert f"continue with: cutegen resume r1 --db {env['db']}" in msg, msg
    r = invoke(cli, ["resume", "r1", "--db", env["db"]])
    assert r.exit_code == 0, r.output
    assert "evaluations 6" in r.stdout


@pytest.mark.parametrize("error", [GPURequiredError, DeviceLostError])
def test_a_machine_failure_keeps_its_type(cli, env, monkeypatch, error):
    """The way on is added to the error itself: `cutegen bench` stops on GPURequiredError (a
    machine without a GPU has no way on to add) and a pool reads DeviceLostError's device."""

    class _Fails(FakeEvaluator):
        def evaluate(self, candidate):
            raise error("the machine failed")

    monkeypatch.setattr(api, "make_evaluator", lambda *a: _Fails(seed=1))
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    r = invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--max-evals", "3",
                     "--run", "r2", "--db", env["db"]])
    assert type(r.exception) is error, r.output
    assert ("cutegen resume r2" in str(r.exception)) == (error is not GPURequiredError)


def test_resume_refuses_changed_task_or_toolchain(cli, made, env, monkeypatch):
    from cutegen.codegen import toolchain

    base = ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
            "--max-evals", "2"]
    assert invoke(cli, [*base, "--run", "r1"]).exit_code == 0
    assert invoke(cli, [*base, "--run", "r2"]).exit_code == 0
    real = toolchain.versions()
    monkeypatch.setattr(toolchain, "versions", lambda: dict(real, torch="9.9"))
    r = invoke(cli, ["resume", "r1", "--db", env["db"]])
    assert isinstance(r.exception, ResumeMismatchError)
    assert f"torch: {real['torch']} -> 9.9" in str(r.exception)
    monkeypatch.setattr(toolchain, "versions", lambda: real)
    with open(env["task"], "a") as f:
        f.write("# edited\n")
    r = invoke(cli, ["resume", "r2", "--db", env["db"]])
    assert isinstance(r.exception, ResumeMismatchError) and "task file" in str(r.exception)
    os.remove(env["task"])
    r = invoke(cli, ["resume", "r2", "--db", env["db"]])
    assert isinstance(r.exception, ResumeMismatchError) and "not found" in str(r.exception)


def test_resume_extends_the_budget(cli, made, env):
    base = ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
            "--max-evals", "3", "--run", "r1"]
    assert invoke(cli, base).exit_code == 0
    r = invoke(cli, ["resume", "r1", "--db", env["db"]])
    assert "evaluations 3" in r.stdout  # the stored budget is already spent
    r = invoke(cli, ["resume", "r1", "--db", env["db"], "--max-evals", "7"])
    assert r.exit_code == 0 and "evaluations 7" in r.stdout


def test_status_and_show(cli, made, env):
    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "6", "--run", "r1"]).exit_code == 0
    r = invoke(cli, ["status", "--db", env["db"]])
    assert r.exit_code == 0 and "r1" in r.stdout and "finished" in r.stdout
    r = invoke(cli, ["status", "--db", env["db"], "--json"])
    (row,) = json.loads(r.stdout)
    assert row["run"] == "r1" and row["evaluations"] == 6 and sum(row["verdicts"].values()) == 6
    r = invoke(cli, ["status", "r1", "--db", env["db"], "--json"])
    one = json.loads(r.stdout)
    assert one["nodes"] >= 6 and one["sessions"][0]["end_reason"] == "finished"
    assert one["best_node"] == one["best_history"][-1]["node"]
    r = invoke(cli, ["status", "r1", "--db", env["db"]])
    assert r.exit_code == 0 and "task file" in r.stdout
    r = invoke(cli, ["show", "r1", "2", "--db", env["db"], "--json"])
    node = json.loads(r.stdout)
    assert node["parent"] == 1 and [x["node"] for x in node["lineage"]] == [1, 2]
    assert "TUNABLES" in node["source"] and node["evaluation"]["verdict"]
    assert node["lessons"] and node["move"]["kind"] == "tunable"
    r = invoke(cli, ["show", "r1", "2", "--db", env["db"]])
    assert r.exit_code == 0 and "lineage: [1] seed seed.py" in r.stdout and "TUNABLES" in r.stdout
    assert node["evaluation"]["timing"]  # the observer's busy time, next to the median
    assert "the GPU busy" in r.stdout and node["evaluation"]["busy_us"] > 0
    assert "GPU time by kernel (median a call): FakeKernel" in r.stdout  # the observer's split


def test_show_lists_each_profilers_report(cli, made, env):
    # issue 7's view of one node: the profilers that ran, their time, findings and guidance
    from cutegen.profilers import Finding
    from cutegen.search.storage import ProfileRecord, SqliteStorage

    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "1", "--run", "r1"]).exit_code == 0
    s = SqliteStorage(env["db"])
    try:
        s.record_profile(ProfileRecord(
            node_id=1, profiler="ncu", status="ok", seconds=12.5,
            findings=(Finding("dram__throughput.avg.pct_of_peak_sustained_elapsed", 83.1),
                      Finding("hint.memory_bound", "dram", "DRAM at 83% of peak"))))
    finally:
        s.close()
    r = invoke(cli, ["show", "r1", "1", "--db", env["db"]])
    assert r.exit_code == 0
    assert "s of profiler time):" in r.stdout  # the fake evaluator's hook records one too
    assert "ncu: ok in 12.5 s" in r.stdout
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed = 83.1" in r.stdout
    assert "hint.memory_bound = dram (DRAM at 83% of peak)" in r.stdout
    d = json.loads(invoke(cli, ["show", "r1", "1", "--db", env["db"], "--json"]).stdout)
    ncu = [p for p in d["profiles"] if p["profiler"] == "ncu"]
    assert ncu and ncu[0]["seconds"] == 12.5 and ncu[0]["findings"][1]["value"] == "dram"


def test_status_and_show_errors(cli, made, env, tmp_path):
    r = invoke(cli, ["status", "--db", str(tmp_path / "none.db")])
    assert isinstance(r.exception, StorageError) and "no store" in str(r.exception)
    assert not (tmp_path / "none.db").exists()  # looking never creates a store
    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "2", "--run", "r1"]).exit_code == 0
    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "2", "--run", "r2"]).exit_code == 0
    r = invoke(cli, ["status", "nope", "--db", env["db"]])
    assert isinstance(r.exception, RunNotFoundError) and "r1, r2" in str(r.exception)
    r = invoke(cli, ["show", "r2", "1", "--db", env["db"]])
    assert isinstance(r.exception, StorageError) and "does not belong" in str(r.exception)


def test_nodes_lists_a_runs_nodes_and_rm_removes_the_run(cli, made, env, tmp_path):
    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "3", "--run", "a-long-run-name-people-must-type"]
                  ).exit_code == 0
    r = invoke(cli, ["nodes", "a-long-run-name-people-must-type", "--db", env["db"], "--json"])
    rows = json.loads(r.stdout)
    assert [x["node"] for x in rows] == [1, 2, 3] and rows[0]["verdict"] == "correct"
    r = invoke(cli, ["status", "--db", env["db"]])  # piped: plain text, names whole
    assert "a-long-run-name-people-must-type" in r.stdout
    r = invoke(cli, ["rm", "a-long-run-name-people-must-type", "--db", env["db"], "--yes"])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "s" / "a-long-run-name-people-must-type").exists()
    s = SqliteStorage(env["db"])
    assert s.list_runs() == []
    s.close()


def test_status_reads_a_read_only_store(cli, made, env, tmp_path):
    assert invoke(cli, ["search", env["task"], "--seed-candidate", env["seed"], "--db", env["db"],
                        "--max-evals", "2", "--run", "r1"]).exit_code == 0
    folder = tmp_path / "s"
    for p in folder.iterdir():
        if p.is_file():
            p.chmod(0o444)
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        r = invoke(cli, ["status", "r1", "--db", env["db"], "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["evaluations"] == 2
    finally:
        folder.chmod(0o755)


def test_summary_says_when_the_best_is_slower_than_eager(capsys):
    """A best kernel slower than eager PyTorch is still the best the search found; the end
    of the search says so and how to go on, instead of leaving a 0.53x to be read as a win."""
    from types import SimpleNamespace

    from cutegen.cli.search_view import print_summary

    def summary(speedup, tf32=None):
        return SimpleNamespace(run="r9", status="finished", reason="budget", evaluations=3,
                               verdicts={"correct": 3}, best=SimpleNamespace(id=7),
                               best_speedup=speedup, best_speedup_tf32=tf32)

    print_summary(summary(0.53))
    out = capsys.readouterr().out
    assert "0.53x vs eager" in out and "no candidate beat eager PyTorch" in out
    assert "cutegen resume r9" in out and "TF32" not in out
    print_summary(summary(1.84))
    assert "beat eager" not in capsys.readouterr().out
    print_summary(summary(1.84, 0.61))  # a conv: eager's cuDNN in TF32 said beside it
    out = capsys.readouterr().out
    assert "1.84x vs eager (0.61x vs eager with cuDNN in TF32, torch's default)" in out


def test_search_in_bf16_runs_the_variant_and_resumes_it(cli, made, env, tmp_path):
    """--precision bf16 searches the task's bf16 variant, a file of its own beside the store
    (named after the task), and resume finds it there."""
    r = invoke(cli, ["search", env["task"], "--precision", "bf16", "--seed-candidate",
                     env["seed"], "--db", env["db"], "--max-evals", "2", "--run", "b"])
    assert r.exit_code == 0, r.output
    assert "toy_fp32_bf16: the bf16 variant" in r.stderr
    s = SqliteStorage(env["db"])
    cfg = s.get_run("b").config
    s.close()
    assert cfg.task_name == "toy_fp32_bf16"
    path = tmp_path / "s" / "variants"
    (variant,) = path.glob("*/toy_fp32_bf16.py")
    assert cfg.task_path == str(variant.resolve())
    assert variant.read_text().startswith(TASK_SRC) and "bfloat16" in variant.read_text()
    r = invoke(cli, ["resume", "b", "--db", env["db"], "--max-evals", "4"])
    assert r.exit_code == 0 and "evaluations 4" in r.stdout, r.output
    bad = invoke(cli, ["search", env["task"], "--precision", "fp8", "--db", env["db"]])
    assert bad.exit_code == 2 and "fp8" in bad.output
