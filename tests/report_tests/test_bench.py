"""``cutegen bench``: suites, per-task results read from the store, means, Markdown, JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

import cutegen.api as api
import cutegen.cli.bench as cli_bench
from cutegen.codegen.ceilings import ceilings_from_samples
from cutegen.codegen.evaluation import COMPILE_FAILED, EAGER_FAILED
from cutegen.codegen.roofline import H200_MEASURED, Ceilings
from cutegen.codegen.suites import (
    SuiteTask,
    bundled_suite_names,
    dtype_of,
    dtype_of_file,
    kernelbench_suite,
    load_suite,
)
from cutegen.codegen.tasks import bundled_task_names
from cutegen.errors import ConfigError, GPURequiredError
from cutegen.search.report.bench import TaskResult, collect_task_result, sanity_flags
from cutegen.search.report.bench_table import (
    BenchReport,
    geomean,
    render_markdown,
    summarize,
    task_table,
    to_json,
    write_outputs,
)
from cutegen.search.storage import SqliteStorage
from cutegen.testing import FakeEvaluator

DATA = Path(__file__).resolve().parents[1] / "data"


def ok(task, sp_e, sp_c=None, *, dtype="bf16", tier="A", frac=None):
    return TaskResult(task, dtype, tier, "ok", speedup_eager=sp_e, speedup_compile=sp_c,
                      best_us=10.0, frac_kernel=frac)


def failed(task, *, dtype="bf16", tier="A"):
    return TaskResult(task, dtype, tier, "no_best")


# -- suites ------------------------------------------------------------------------------
def test_bundled_suites():
    assert {"tierA", "fp32", "gemm", "conv", "all"} <= set(bundled_suite_names())
    tasks = set(bundled_task_names())
    a, f, g, r, c, lg, every = (load_suite(n) for n in ("tierA", "fp32", "gemm", "reduce", "conv",
                                                          "long", "all"))
    assert {t.dtype for t in a.tasks} == {"bf16"} and {t.tier for t in a.tasks} == {"A"}
    assert {t.dtype for t in f.tasks} == {"fp32"}
    assert {t.dtype for t in g.tasks} == {"bf16", "fp32"} and {t.tier for t in g.tasks} == {"C", "D"}
    assert all(t.tier == "D" for t in g.tasks if "bias" in t.task or "residual" in t.task)
    assert {t.tier for t in c.tasks} == {"conv", "conv-chain"}
    assert [t.task for t in every.tasks] == [t.task for s in (a, f, g, r, c, lg)
                                              for t in s.tasks]
    assert {t.task for t in every.tasks} <= tasks  # every entry is a bundled task
    assert {t.task for t in every.tasks} == tasks  # and `all` covers all of them
    mem = load_suite("memory")
    assert [(t.task, t.tier) for t in mem.tasks] == [(t.task, t.tier) for s in (a, f)
                                                     for t in s.tasks]


def test_suite_files(tmp_path):
    (tmp_path / "k.py").write_text("x")
    (tmp_path / "s.toml").write_text('name = "mine"\nmax_evals = 7\n[[tasks]]\ntask = "k.py"\n'
                                     'seed_candidates = ["seed.py"]\n[[tasks]]\n'
                                     'task = "softmax_bf16"\ntier = "X"\n')
    s = load_suite(str(tmp_path / "s.toml"))
    assert s.name == "mine" and s.max_evals == 7
    t1, t2 = s.tasks
    assert t1.task == str(tmp_path / "k.py") and t1.dtype == "fp32" and t1.tier == "mine"
    assert t1.seed_candidates == (str(tmp_path / "seed.py"),) and t1.label == "k"
    assert (t2.dtype, t2.tier) == ("bf16", "X")
    (tmp_path / "loop.toml").write_text(f'include = ["{tmp_path / "loop.toml"}"]\n')
    bad = {"nope": "no suite named 'nope'", str(tmp_path / "loop.toml"): "includes itself"}
    (tmp_path / "broken.toml").write_text("name = [")
    bad[str(tmp_path / "broken.toml")] = "not valid TOML"
    (tmp_path / "notask.toml").write_text("[[tasks]]\ndtype = 'bf16'\n")
    bad[str(tmp_path / "notask.toml")] = "needs a 'task'"
    for spec, msg in bad.items():
        with pytest.raises(ConfigError, match=msg):
            load_suite(spec)


def test_kernelbench_suite(tmp_path):
    lvl = tmp_path / "KernelBench" / "level1"
    lvl.mkdir(parents=True)
    for name in ("19_ReLU.py", "23_Softmax.py", "3_Batched_matmul.py"):
        (lvl / name).write_text("x")
    s = kernelbench_suite(tmp_path, 1)
    assert [t.kernelbench[2] for t in s.tasks] == [3, 19, 23]
    assert {t.dtype for t in s.tasks} == {"fp32"} and s.tasks[1].label == "kb_L1_P19"
    assert [t.kernelbench[2] for t in kernelbench_suite(tmp_path, 1, [23]).tasks] == [23]


def test_kernelbench_task_dtype_is_read_from_its_inputs(tmp_path):
    """A KernelBench file's dtype comes from what get_inputs builds (L1 97 makes fp16 inputs
    on "cuda"; before, every KernelBench task was "fp32" and joined the fp32 means)."""
    lvl = tmp_path / "level1"
    lvl.mkdir()
    bodies = {
        "97_SDPA.py": "torch.rand(2, 3, device='cuda', dtype=torch.float16)",
        "5_Half.py": "torch.rand(2, 3).half()",
        "6_Bf16.py": "torch.randn(4, dtype=torch.bfloat16)",
        "7_Plain.py": "torch.rand(2, 3)",
    }
    for name, expr in bodies.items():
        (lvl / name).write_text(f"import torch\n\ndef get_inputs():\n    return [{expr}]\n")
    # a dtype named elsewhere in the file (a cast inside forward) does not count
    (lvl / "8_CastInForward.py").write_text(
        "import torch\n\ndef forward(x):\n    return x.half()\n\n"
        "def get_inputs():\n    return [torch.rand(2, 3)]\n")
    (lvl / "9_Broken.py").write_text("def get_inputs(:\n")
    dtypes = {t.kernelbench[2]: t.dtype for t in kernelbench_suite(tmp_path, 1).tasks}
    assert dtypes == {5: "fp16", 6: "bf16", 7: "fp32", 8: "fp32", 9: "fp32", 97: "fp16"}
    assert dtype_of_file(tmp_path / "missing.py") == "fp32"


def test_task_dtype_is_read_from_the_last_get_inputs(tmp_path):
    """A file that defines get_inputs twice runs the last one (an appended wrapper that casts
    the first one's tensors): its dtype is that one's, not the first's."""
    f = tmp_path / "task.py"
    f.write_text("import torch\n\ndef get_inputs():\n    return [torch.rand(2, 3)]\n\n"
                 "_first = get_inputs\n\ndef get_inputs():\n"
                 "    return [t.to(torch.bfloat16) for t in _first()]\n")
    assert dtype_of_file(f) == "bf16"


def test_a_variant_file_has_its_variants_dtype(tmp_path):
    """A bf16 variant's get_inputs casts through a helper of its own: read from the file
    alone (a suite of the user's own listing it), it is bf16, not the original's fp32."""
    from cutegen.codegen.tasks import resolve_task
    from cutegen.codegen.variants import make_variant

    v = make_variant(resolve_task("gelu_scale_bias_fp32"), "bf16", tmp_path)
    assert dtype_of_file(v.path) == "bf16"


def test_dtype_of():
    assert [dtype_of(n) for n in ("softmax_bf16", "x_fp16_y", "kb_L1_P23", "bf16x")] == [
        "bf16", "fp16", "fp32", "fp32"]


# -- means -------------------------------------------------------------------------------
def test_geomean():
    assert geomean([]) is None and geomean([2.0, 8.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_means_by_group_and_failures():
    rs = [ok("a", 4.0, 2.0, frac=0.9), ok("b", 1.0, 0.5, frac=0.4), failed("c"),
          ok("d", 9.0, 3.0, dtype="fp32"), TaskResult("e", "fp32", "A", "error", error="x")]
    bf16, fp32 = summarize(rs)
    assert (bf16.dtype, bf16.tasks, bf16.correct) == ("bf16", 3, 2)
    assert bf16.eager_correct == pytest.approx(2.0)  # sqrt(4 * 1): fp32 never mixed in
    assert bf16.eager_fail1 == pytest.approx(4 ** (1 / 3))  # (4 * 1 * 1.0) ** (1/3)
    assert bf16.compile_correct == pytest.approx(1.0)
    assert bf16.compile_fail1 == pytest.approx(1.0)  # (2 * 0.5 * 1.0) ** (1/3)
    assert bf16.fast_1 == pytest.approx(1 / 3) and bf16.fast_1_2 == pytest.approx(1 / 3)
    assert bf16.roofline_correct == pytest.approx(math.sqrt(0.9 * 0.4))
    assert (fp32.tasks, fp32.correct) == (2, 1)
    assert (fp32.eager_correct, fp32.eager_fail1) == (pytest.approx(9.0), pytest.approx(3.0))
    assert fp32.fast_1 == 0.5


def test_task_without_a_compile_baseline():
    (g,) = summarize([ok("a", 2.0, None), ok("b", 2.0, 4.0), failed("c")])
    assert g.compile_correct == pytest.approx(4.0) and g.compile_tasks == 2  # a: no torch.compile timing
    assert g.compile_fail1 == pytest.approx(2.0)  # (4 * 1.0) ** (1/2)


def test_sanity_flags():
    r = TaskResult("t", "bf16", "A", "ok", speedup_eager=12.0, speedup_compile=2.5,
                   frac_kernel=1.05, frac_compile=0.9)
    flags = " | ".join(sanity_flags(r, eval_flags=("timing_disagreement",), suspicious=2))
    for text in ("kernel at 105% of the bound", "12.0x vs eager", "2.50x vs torch.compile",
                 "timing_disagreement", "2 candidate(s) judged suspicious"):
        assert text in flags
    assert sanity_flags(ok("fine", 3.0, 1.5, frac=0.9)) == ()
    # beyond a compute bound: the FLOPs are the reference's own (KernelBench L1 12's
    # torch.diag(A) @ B, a row scaling: 373 % of its 4096^3 product's bound)
    diag = TaskResult("t", "fp32", "A", "ok", bound_kind="compute", frac_kernel=3.73)
    (flag,) = sanity_flags(diag)
    assert "373% of the bound" in flag and "fewer FLOPs than the reference" in flag


def test_a_host_bound_best_is_named():
    r = TaskResult("t", "fp32", "A", "ok", best_us=253.0, busy_us=105.5)
    (flag,) = sanity_flags(r)
    assert flag.startswith("host-bound") and "105.5 of the 253.0 us" in flag
    assert sanity_flags(TaskResult("t", "fp32", "A", "ok", best_us=253.0, busy_us=240.0)) == ()
    assert sanity_flags(TaskResult("t", "fp32", "A", "ok", best_us=253.0)) == ()


def test_a_best_the_gate_re_timed_differently_is_flagged():
    # on the H200 a run's first evaluation measured 2377 us; the gate's re-timing of the
    # same kernel in fresh workers gave 2287 us, and the table printed 2377 without a word
    from cutegen.search.report.bench import latest_retime_us
    from cutegen.search.storage import BestDecision

    history = [BestDecision(1, 16, None, True, "first correct candidate"),
               BestDecision(1, 17, 16, False, "0.6% faster", median_new_us=2273.0,
                            median_old_us=2287.7, n_new=100, n_old=100),
               BestDecision(1, 18, 16, False, "not faster on its own evaluation")]
    assert latest_retime_us(history, 16) == 2287.7
    assert latest_retime_us(history, 17) is None  # rejected: never the best
    accepted = [*history, BestDecision(1, 19, 16, True, "faster", median_new_us=2200.0,
                                       median_old_us=2290.0, n_new=100, n_old=100)]
    assert latest_retime_us(accepted, 19) == 2200.0
    r = TaskResult("t", "bf16", "A", "ok", best_us=2377.4, retimed_us=2287.7)
    (flag,) = sanity_flags(r)
    assert "re-timed at 2,287.7 us" in flag and "-3.8%" in flag
    assert sanity_flags(TaskResult("t", "bf16", "A", "ok", best_us=100.0, retimed_us=99.0)) == ()


def test_ceilings_from_samples():
    m = ceilings_from_samples(copy_samples_us=[500.0, 510.0, 490.0], copy_bytes=2**31,
                              gemm_samples_us=[1500.0] * 3, gemm_n=8192)
    assert m.copy_gbs == pytest.approx(2 * 2**31 / 500e-6 / 1e9)
    assert m.gemm_tflops == pytest.approx(2 * 8192**3 / 1500e-6 / 1e12)
    assert m.ceilings().bandwidth_gbs == m.copy_gbs
    assert type(m).from_dict(json.loads(json.dumps(m.to_dict()))) == m
    with pytest.raises(ValueError):
        ceilings_from_samples(copy_samples_us=[], copy_bytes=1, gemm_samples_us=[1.0], gemm_n=1)


# -- from the store ------------------------------------------------------------------------
def test_collect_from_a_fake_search(fake_run):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    best = s.get_best_node(run.id)
    ev = s.get_evaluation(best.id)
    order = [r.node_id for r in s.get_results(run.id)]
    r = collect_task_result(s, run, SuiteTask("toy_bf16", "bf16", "A"), H200_MEASURED)
    s.close()
    assert r.status == "ok" and r.correct and r.best_node == best.id and r.run == "r1"
    assert r.speedup_eager == ev.speedup_eager and r.best_us == ev.time_us
    assert r.ci_eager[0] < r.speedup_eager < r.ci_eager[1]
    assert r.evals_to_best == order.index(best.id) + 1 and r.evaluations == len(order)
    assert 0 < r.gpu_min_to_best <= r.gpu_min_total and r.llm_usd == pytest.approx(0.0123)
    assert r.frac_kernel is None and r.compile_us is None  # the fake has no roofline, no compile


def test_a_kernel_whose_eager_baseline_failed_is_correct_and_says_why(fake_run, monkeypatch):
    """Before: a verified, timed kernel whose eager forward found no room on the GPU (L1 45 on
    an 80 GB card) was counted as not correct and its table row said "-" with no reason (the
    reason was only in ``cutegen show``)."""
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    best = s.get_best_node(run.id)
    real = s.get_evaluation
    why = "OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB"

    def no_eager(node_id):
        ev = real(node_id)
        if node_id != best.id:
            return ev
        return dataclasses.replace(ev, eager=None, compiled=None, details=ev.details + (
            EAGER_FAILED + why, COMPILE_FAILED + "not timed: the eager forward failed"))

    monkeypatch.setattr(s, "get_evaluation", no_eager)
    r = collect_task_result(s, run, SuiteTask("toy_bf16", "bf16", "A"), H200_MEASURED)
    s.close()
    assert r.status == "ok" and r.correct and r.best_us is not None
    assert r.speedup_eager is None and r.eager_error == why
    assert [f for f in r.flags if "eager" in f or "compile" in f] == [
        f"no eager baseline, so no speed-up: {why}"]  # torch.compile's follows from it
    (g,) = summarize([r, ok("b", 4.0, 2.0)])
    assert g.correct == 2 and g.eager_correct == pytest.approx(4.0)
    assert g.eager_fail1 == pytest.approx(2.0)  # the one without a baseline counts 1.0×
    row = next(line for line in task_table([r]).splitlines() if line.startswith("| toy_bf16"))
    assert "failed (flags)" in row and f"{r.best_us:,.1f} µs" in row
    c = TaskResult("c", "bf16", "A", "ok", best_us=5.0, speedup_eager=2.0,
                   compile_error="torch._dynamo failed")
    assert sanity_flags(c) == ("no torch.compile baseline: torch._dynamo failed",)


def test_markdown_and_json(tmp_path):
    ceil = ceilings_from_samples(copy_samples_us=[500.0], copy_bytes=2**31,
                                 gemm_samples_us=[1500.0], gemm_n=8192, gpu="H200",
                                 clocks={"sm_mhz": 1980})
    tasks = (ok("softmax_bf16", 3.1, 2.3, frac=0.93), failed("rmsnorm_bf16"),
             TaskResult("layernorm_bf16", "bf16", "A", "error", error="no seed candidate"),
             TaskResult("x_bf16", "bf16", "A", "ok", speedup_eager=11.0, frac_kernel=1.2,
                        flags=("kernel at 120% of the bound",)))
    rep = BenchReport("tierA", "Tier A", "2026-01-01 00:00", "cutegen bench tierA",
                      {"gpu": "H200", "torch": "2.11", "cutegen": "0.1.0"}, ceil, "", 40, False,
                      tasks)
    md = render_markdown(rep)
    for text in ("# cutegen benchmark: tierA", "`cutegen bench tierA`", "Machine**: H200",
                 "copy bandwidth 8.59 TB/s", "8192³ 733 TFLOP/s", "clocks: sm_mhz 1980",
                 "| softmax_bf16 | bf16 | 10.0 µs |", "no correct kernel", "not run",
                 "failures as 1.0×", "over correct", "fp32 and bf16 never share a mean",
                 "**x_bf16**: kernel at 120% of the bound", "**layernorm_bf16**: no seed",
                 "## Reading", "_To be written by a person"):
        assert text in md, text
    js = to_json(rep)
    assert js["schema"] == 1 and len(js["tasks"]) == 4 and js["summary"][0]["tasks"] == 4
    assert js["ceilings"]["gemm_n"] == 8192
    paths = write_outputs(rep, tmp_path / "out")
    assert [p.name for p in paths] == ["BENCHMARKS.md", "bench.json"]
    assert json.loads(paths[1].read_text()) == json.loads(json.dumps(js))
    none = render_markdown(BenchReport("s", "", "d", "c", {}, None, "--compile-only: nothing "
                                       "is timed", 3, True, (failed("a"),)))
    assert "not measured (--compile-only" in none and "TB/s" not in none


# -- the command -------------------------------------------------------------------------
TASK_SRC = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


@pytest.fixture
def tiny_suite(tmp_path, make_run):
    fr = make_run(tmp_path / "seedsrc", evals=1, extras=False)  # for its seed file
    for name in ("toy_bf16", "toy_fp32"):
        (tmp_path / f"{name}.py").write_text(TASK_SRC)
    (tmp_path / "suite.toml").write_text(
        'name = "tiny"\nmax_evals = 6\n'
        f'[[tasks]]\ntask = "toy_bf16.py"\nseed_candidates = ["{fr.seed_path}"]\n'
        f'[[tasks]]\ntask = "toy_fp32.py"\nseed_candidates = ["{fr.seed_path}"]\n'
        '[[tasks]]\ntask = "toy_fp32.py"\ntier = "noseed"\n')
    return tmp_path / "suite.toml"


def _no_gpu_needed(monkeypatch):
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    monkeypatch.setattr(cli_bench, "require_gpu", lambda what: None)


def _cli():
    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    return cli


def test_bench_command_with_the_fake_evaluator(tiny_suite, tmp_path, monkeypatch):
    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    db, out = tmp_path / "b.db", tmp_path / "out"
    r = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(db), "--out",
                                    str(out), "--no-ceilings", "--run-prefix", "b1",
                                    "--gpu", "0", "--eval-timeout", "1234"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "| toy_bf16 | bf16 |" in r.stdout and "failures as 1.0×" in r.stdout
    assert "run b1-toy_bf16" in r.stderr
    js = json.loads((out / "bench.json").read_text())
    by = {(t["task"], t["tier"]): t for t in js["tasks"]}
    assert by[("toy_bf16", "tiny")]["status"] == "ok"
    assert by[("toy_bf16", "tiny")]["evaluations"] == 6
    assert by[("toy_fp32", "noseed")]["status"] == "error"
    assert "no seed candidate" in by[("toy_fp32", "noseed")]["error"]
    assert js["ceilings"] is None and "--no-ceilings" in js["ceilings_note"]
    assert {(g["tier"], g["dtype"]) for g in js["summary"]} == {
        ("tiny", "bf16"), ("tiny", "fp32"), ("noseed", "fp32")}
    assert (out / "reports" / "b1-toy_bf16.html").is_file()
    md = (out / "BENCHMARKS.md").read_text()
    assert "cutegen bench" in md and "--run-prefix b1" in md and "`b1-toy_bf16`" in md
    assert "--gpu 0" in md  # a GPU index of 0 is an option given, not a default
    s = SqliteStorage(db)
    assert {x.name for x in s.list_runs()} == {"b1-toy_bf16", "b1-toy_fp32"}
    assert {x.config.settings["eval_options"]["eval_timeout_s"] for x in s.list_runs()} == {1234.0}
    assert "b1-toy_fp32-2" not in md  # the task without a seed never made a run
    s.close()
    again = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(db),
                                        "--no-ceilings", "--run-prefix", "b1"])
    assert "choose another --run-prefix" in str(again.exception)


def test_bench_in_bf16_runs_each_tasks_variant_in_a_mean_of_its_own(tiny_suite, tmp_path,
                                                                    monkeypatch):
    """--precision bf16: each fp32 task's bf16 variant (a file of its own beside the store),
    in the bf16 means; a task already in bf16 is kept as it is."""
    _no_gpu_needed(monkeypatch)
    tasks = []

    def make(task, settings, run_dir, storage):
        tasks.append(task)
        return FakeEvaluator(seed=2)

    monkeypatch.setattr(api, "make_evaluator", make)
    db = tmp_path / "b.db"
    r = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(db), "--no-ceilings",
                                    "--run-prefix", "p", "--precision", "bf16"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    s = SqliteStorage(db)
    runs = {x.name: x.config for x in s.list_runs()}
    s.close()
    assert set(runs) == {"p-toy_bf16", "p-toy_fp32_bf16"}  # the third has no seed
    assert runs["p-toy_bf16"].task_path == str(tmp_path / "toy_bf16.py")
    assert runs["p-toy_fp32_bf16"].task_path.startswith(str(tmp_path / "variants"))
    assert {t.name for t in tasks} == {"toy_bf16", "toy_fp32_bf16"}
    assert "| toy_fp32_bf16 | bf16 |" in r.stdout and "| toy_fp32 | fp32 |" not in r.stdout


def test_a_bench_stopped_from_outside_leaves_the_table_so_far(tiny_suite, tmp_path,
                                                              monkeypatch):
    """The table is written after every task: a bench killed during a task (a job's time
    limit, the GPU machine taken back) left nothing in --out before, only the store (found
    on the H100: three calls of a KernelBench sweep, the last two with no table)."""

    class Killed(BaseException):
        pass

    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    collect, seen = cli_bench._collect, []

    def killed_in_the_second(*a, **kw):
        seen.append(a[1])
        if len(seen) == 2:
            raise Killed
        return collect(*a, **kw)

    monkeypatch.setattr(cli_bench, "_collect", killed_in_the_second)
    out = tmp_path / "out"
    with pytest.raises(Killed):
        CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(tmp_path / "b.db"),
                                    "--out", str(out), "--no-ceilings", "--run-prefix", "k1",
                                    "--no-reports"])
    js = json.loads((out / "bench.json").read_text())
    status = [(t["task"], t["status"], t.get("error", "")) for t in js["tasks"]]
    assert status[0][:2] == ("toy_bf16", "ok")
    assert all(st == "error" and "not run yet" in err for _, st, err in status[1:])
    assert "toy_bf16" in (out / "BENCHMARKS.md").read_text()


def test_a_task_without_a_correct_kernel_says_why(tiny_suite, tmp_path, monkeypatch):
    """Before: the table said "no correct kernel" with verdict counts only, and a bench run on
    a machine that is gone (KernelBench level 1 on the H100) left no way to read why."""
    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator", lambda task, settings, run_dir, storage:
                        FakeEvaluator(seed=2, failure_rate=1.0))
    out = tmp_path / "out"
    r = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(tmp_path / "b.db"),
                                    "--out", str(out), "--no-ceilings", "--run-prefix", "f1",
                                    "--max-evals", "2", "--no-reports"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    js = json.loads((out / "bench.json").read_text())
    failed = [t for t in js["tasks"] if t["status"] == "no_best"]
    assert failed and all(t["failure"] for t in failed), failed
    verdicts = {t["failure"].split(":")[0] for t in failed}
    assert verdicts <= {"compile_error", "wrong", "crash", "timeout"}, verdicts
    md = (out / "BENCHMARKS.md").read_text()
    assert "## Why tasks have no correct kernel" in md
    assert f"**{failed[0]['task']}**: {failed[0]['failure']}" in md
    assert " - " in r.stderr  # each failed evaluation's line says why, shortened
    assert "cutegen nodes f1-toy_bf16 --failed" in r.stderr + r.stdout


def _statuses(out):
    js = json.loads((out / "bench.json").read_text())
    return {(t["task"], t["tier"]): (t["status"], t.get("evaluations"), t.get("error", ""))
            for t in js["tasks"]}


def test_bench_stops_at_its_time_limit_and_resumes(tiny_suite, tmp_path, monkeypatch):
    """--max-minutes leaves tasks not run (said so in the table); --resume with the same
    prefix reads finished runs, extends one cut short and runs the rest."""
    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    now = [0.0]

    def clock():  # every look at the bench's clock costs 50 s
        now[0] += 50.0
        return now[0]

    monkeypatch.setattr(cli_bench, "_clock", clock)
    db, out = tmp_path / "b.db", tmp_path / "out"
    base = ["bench", str(tiny_suite), "--db", str(db), "--out", str(out), "--no-ceilings",
            "--run-prefix", "b2"]
    r = CliRunner().invoke(_cli(), [*base, "--max-minutes", "1.5", "--max-evals", "2"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    st = _statuses(out)
    assert st[("toy_bf16", "tiny")][:2] == ("ok", 2)  # started with 40 s of 90 left
    assert st[("toy_fp32", "tiny")][0] == "error" and "--resume" in st[("toy_fp32", "tiny")][2]
    assert "toy_fp32: not run (--max-minutes)" in r.stderr
    assert "not run" in (out / "BENCHMARKS.md").read_text()
    s = SqliteStorage(db)
    assert {x.name for x in s.list_runs()} == {"b2-toy_bf16"}
    s.close()

    again = CliRunner().invoke(_cli(), base)
    assert "--resume" in str(again.exception)  # the runs exist: refuse without --resume
    no_prefix = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(db),
                                            "--no-ceilings", "--resume"])
    assert isinstance(no_prefix.exception, ConfigError)

    def resume(evals: int, said: str) -> dict:
        r = CliRunner().invoke(_cli(), [*base, "--resume", "--max-evals", str(evals)],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.output
        assert said in r.stderr
        st = _statuses(out)
        assert st[("toy_bf16", "tiny")][:2] == ("ok", evals)
        assert st[("toy_fp32", "tiny")][:2] == ("ok", evals)
        return st

    st = resume(2, "b2-toy_bf16 (finished earlier)")
    assert "no seed candidate" in st[("toy_fp32", "noseed")][2]
    # a larger budget: the finished runs have too few evaluations, so both are resumed
    resume(4, "b2-toy_bf16 (resumed)")


def test_a_resumed_bench_runs_again_a_task_an_older_evaluator_judged(tiny_suite, tmp_path,
                                                                    monkeypatch):
    """A resumed bench read a finished run back whatever evaluator had judged it: the
    thirty-fifth session's KernelBench table showed L1 12 ``suspicious`` from the previous
    session's evaluator (version 4) beside tasks judged by version 5, which no longer calls
    it so. Now such a run stays in the store and its task runs again as RUN-hVERSION; a
    later --resume reads that run; ``cutegen resume`` of the old run is refused."""
    from cutegen.codegen.evaluation import HARNESS_VERSION

    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    db, out = tmp_path / "b.db", tmp_path / "out"
    base = ["bench", str(tiny_suite), "--db", str(db), "--out", str(out), "--no-ceilings",
            "--run-prefix", "h1", "--max-evals", "2", "--no-reports"]
    r = CliRunner().invoke(_cli(), base, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    old = HARNESS_VERSION - 1
    s = SqliteStorage(db)
    s._conn.execute(  # the first task's run as an older cutegen stored it
        "UPDATE evaluations SET evaluation_json = json_set(evaluation_json, "
        "'$.harness_version', ?) WHERE run_id = ?", (old, s.get_run("h1-toy_bf16").id))
    s._conn.commit()
    assert s.get_harness_versions(s.get_run("h1-toy_bf16").id) == {old: 2}
    assert s.get_harness_versions(s.get_run("h1-toy_fp32").id) == {HARNESS_VERSION: 2}
    s.close()
    fresh = f"h1-toy_bf16-h{HARNESS_VERSION}"
    r = CliRunner().invoke(_cli(), [*base, "--resume"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"judged by evaluator version {old}" in r.stderr and f"runs again as {fresh}" in r.stderr
    assert "h1-toy_fp32 (finished earlier)" in r.stderr
    st = _statuses(out)
    assert st[("toy_bf16", "tiny")][:2] == ("ok", 2) and st[("toy_fp32", "tiny")][:2] == ("ok", 2)
    assert f"`{fresh}`" in (out / "BENCHMARKS.md").read_text()
    s = SqliteStorage(db)
    assert {x.name for x in s.list_runs()} == {"h1-toy_bf16", "h1-toy_fp32", fresh}
    assert s.get_harness_versions(s.get_run(fresh).id) == {HARNESS_VERSION: 2}
    s.close()
    r = CliRunner().invoke(_cli(), [*base, "--resume"], catch_exceptions=False)
    assert f"{fresh} (finished earlier)" in r.stderr and f"is in {fresh}" in r.stderr
    s = SqliteStorage(db)
    assert len(s.list_runs()) == 3
    s.close()
    r = CliRunner().invoke(_cli(), ["resume", "h1-toy_bf16", "--db", str(db)])
    assert r.exit_code != 0 and f"judged 2 by version {old}" in r.output + str(r.exception)


def test_a_failed_resumption_keeps_what_the_run_stored(tiny_suite, tmp_path, monkeypatch):
    """A store brought to another machine without its runs' files: resuming a task fails
    (its candidates cannot be read), and the table shows what the run evaluated before,
    flagged with the reason, instead of "not run" (the conv bench of 2026-12-03 lost a
    task's result that way)."""
    import shutil

    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    db, out = tmp_path / "b.db", tmp_path / "out"
    base = ["bench", str(tiny_suite), "--db", str(db), "--out", str(out), "--no-ceilings",
            "--run-prefix", "b3"]
    r = CliRunner().invoke(_cli(), [*base, "--max-evals", "1"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert _statuses(out)[("toy_bf16", "tiny")][:2] == ("ok", 1)
    shutil.rmtree(tmp_path / "b3-toy_bf16")  # the store alone travelled
    r = CliRunner().invoke(_cli(), [*base, "--resume", "--max-evals", "2"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "cannot read" in r.stderr
    js = {t["task"] + "/" + t["tier"]: t for t in json.loads((out / "bench.json").read_text())["tasks"]}
    got = js["toy_bf16/tiny"]
    assert (got["status"], got["evaluations"]) == ("ok", 1)
    assert any("cannot read" in f for f in got["flags"]), got
    assert js["toy_fp32/tiny"]["status"] == "ok"


class _ThreadChild:
    """A bench job run in a thread of this process (so the fake evaluator applies)."""

    def __init__(self, spec, log):
        import threading

        from cutegen.cli import bench_jobs as _bench_jobs

        self.code = None
        self.spec = json.loads(spec.read_text())

        def go():
            self.code = _bench_jobs.run_spec(spec)

        self.thread = threading.Thread(target=go)
        self.thread.start()

    def poll(self):
        return None if self.thread.is_alive() else self.code


def test_bench_jobs_run_tasks_at_once_one_gpu_each(tiny_suite, tmp_path, monkeypatch):
    from cutegen.cli import bench_jobs as _bench_jobs

    _no_gpu_needed(monkeypatch)
    monkeypatch.setattr(api, "make_evaluator",
                        lambda task, settings, run_dir, storage: FakeEvaluator(seed=2))
    children = []

    def spawn(spec, log):
        children.append(_ThreadChild(spec, log))
        return children[-1]

    monkeypatch.setattr(_bench_jobs, "spawn_process", spawn)
    db, out = tmp_path / "b.db", tmp_path / "out"
    base = ["bench", str(tiny_suite), "--db", str(db), "--out", str(out), "--no-ceilings",
            "--run-prefix", "j1", "--jobs", "2", "--gpus", "3,5", "--max-evals", "3"]
    r = CliRunner().invoke(_cli(), base, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    # three tasks, two slots: the third started when one of the first two had ended
    gpus = [c.spec["kwargs"]["gpu"] for c in children]
    assert sorted(gpus[:2]) == [3, 5] and gpus[2] in (3, 5)
    assert "on GPU 3" in r.stderr and "on GPU 5" in r.stderr and "done (finished" in r.stderr
    st = _statuses(out)
    assert st[("toy_bf16", "tiny")][:2] == ("ok", 3) and st[("toy_fp32", "tiny")][:2] == ("ok", 3)
    assert "no seed candidate" in st[("toy_fp32", "noseed")][2]  # the child's error came back
    assert (out / "reports" / "j1-toy_fp32.html").is_file()
    assert sorted(p.suffix for p in (out / "logs").iterdir()).count(".json") == 3
    # resuming with a larger budget resumes both runs, each on a job's GPU (as --gpus)
    children.clear()
    r = CliRunner().invoke(_cli(), [*base, "--resume", "--max-evals", "4"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    resumed = [c.spec for c in children if c.spec["command"] == "resume"]
    assert sorted(c["kwargs"]["gpus"] for c in resumed) == ["3", "5"]
    assert _statuses(out)[("toy_bf16", "tiny")][:2] == ("ok", 4)
    bad = CliRunner().invoke(_cli(), [*base[:-6], "--run-prefix", "j2", "--jobs", "3",
                                      "--gpus", "0,1"])
    assert isinstance(bad.exception, ConfigError) and "needs 3 GPUs" in str(bad.exception)
    bad = CliRunner().invoke(_cli(), [*base[:-6], "--run-prefix", "j3", "--jobs", "2",
                                      "--gpus", "1,1"])
    assert isinstance(bad.exception, ConfigError) and "distinct" in str(bad.exception)
    # --gpus alone: one job per GPU
    children.clear()
    r = CliRunner().invoke(_cli(), [*base[:-6], "--run-prefix", "j4", "--gpus", "6,7"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert sorted(c.spec["kwargs"]["gpu"] for c in children[:2]) == [6, 7]
    both = CliRunner().invoke(_cli(), [*base[:-6], "--run-prefix", "j5", "--gpus", "0,1",
                                       "--gpu", "0"])
    assert isinstance(both.exception, ConfigError) and "not both" in str(both.exception)


def test_bench_jobs_with_one_task_left_runs_it_here_on_the_first_jobs_gpu(tmp_path,
                                                                        monkeypatch):
    _no_gpu_needed(monkeypatch)
    seen = []

    def make(task, settings, run_dir, storage):
        seen.append(settings.eval.gpu)
        return FakeEvaluator(seed=2)

    monkeypatch.setattr(api, "make_evaluator", make)
    (tmp_path / "toy_bf16.py").write_text(TASK_SRC)
    seed = _scale_shift_suite(tmp_path, monkeypatch, max_evals=1, tiers=("",)).parent / "seed.py"
    (tmp_path / "one.toml").write_text(
        f'name = "one"\nmax_evals = 2\n[[tasks]]\ntask = "toy_bf16.py"\n'
        f'seed_candidates = ["{seed}"]\n')
    r = CliRunner().invoke(_cli(), ["bench", str(tmp_path / "one.toml"), "--db",
                                    str(tmp_path / "b.db"), "--no-ceilings", "--jobs", "2",
                                    "--gpus", "4,5"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert seen == [4]  # not --gpu's default: the GPUs the user gave the jobs


def test_bench_jobs_skip_what_the_time_limit_leaves_no_room_for(tmp_path):
    from cutegen.cli.bench_jobs import Job, run_jobs

    started, skipped, done = [], [], []
    left = iter([100.0, 50.0, 10.0, 10.0])

    class Done:
        def poll(self):
            return 0

    run_jobs([Job(k, f"t{k}", "search", {"run_name": f"r{k}"}, past_s=5.0 * k)
              for k in (1, 2, 3, 4)],
             gpus=[0], workdir=tmp_path, time_left=lambda: next(left), min_task_s=30,
             on_start=lambda j, g: started.append(j.index), on_done=lambda j: done.append(j),
             on_skip=lambda j: skipped.append(j.index), spawn=lambda spec, log: Done(),
             poll_s=0)
    assert started == [1, 2] and skipped == [3, 4] and [j.error for j in done] == ["", ""]
    spec = json.loads((tmp_path / "002-t2.json").read_text())
    assert spec["kwargs"] == {"run_name": "r2", "gpu": 0, "max_minutes": (50.0 + 10.0) / 60}


def test_a_failed_bench_job_reports_its_log_tail(tmp_path):
    from cutegen.cli.bench_jobs import Job, run_jobs

    class Crashed:
        def poll(self):
            return -9

    def spawn(spec, log):
        log.write_text("compiling\nKilled: out of memory\n")
        return Crashed()

    done = []
    run_jobs([Job(1, "t", "search", {})], gpus=[None], workdir=tmp_path,
             time_left=lambda: None, min_task_s=30, on_start=lambda j, g: None,
             on_done=done.append, on_skip=lambda j: None, spawn=spawn, poll_s=0)
    assert "status -9" in done[0].error and "out of memory" in done[0].error
    assert "gpu" not in json.loads((tmp_path / "001-t.json").read_text())["kwargs"]


def _scale_shift_suite(tmp_path, monkeypatch, *, max_evals: int, tiers: tuple[str, ...]):
    """A suite of the scale_shift test task (once per tier) with a rendered seed, and an
    empty compile cache: what the compile-only bench tests run through real workers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "codegen_fixtures", DATA.parent / "codegen_tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    (tmp_path / "seed.py").write_text(mod.render())
    task = DATA / "tasks" / "scale_shift.py"
    entries = "".join(f'[[tasks]]\ntask = "{task}"\nseed_candidates = ["seed.py"]\n'
                      + (f'tier = "{t}"\n' if t else "") for t in tiers)
    (tmp_path / "suite.toml").write_text(f'name = "ci"\nmax_evals = {max_evals}\n{entries}')
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "suite.toml"


def test_ctrl_c_stops_every_running_bench_job_once(tmp_path):
    from cutegen.cli.bench_jobs import Job, run_jobs

    class Running:
        polls = 0

        def __init__(self):
            self.signals = []

        def poll(self):
            Running.polls += 1
            if Running.polls == 1:
                raise KeyboardInterrupt  # Ctrl-C arrives while the bench waits
            return 130 if self.signals else None

        def send_signal(self, sig):
            self.signals.append(sig)

        def wait(self, timeout=None):
            return 130

    procs = []

    def spawn(spec, log):
        procs.append(Running())
        return procs[-1]

    with pytest.raises(KeyboardInterrupt):
        run_jobs([Job(k, f"t{k}", "search", {}) for k in (1, 2, 3)], gpus=[0, 1],
                 workdir=tmp_path, time_left=lambda: None, min_task_s=30,
                 on_start=lambda j, g: None, on_done=lambda j: None,
                 on_skip=lambda j: None, spawn=spawn, poll_s=0)
    import signal

    assert [p.signals for p in procs] == [[signal.SIGINT], [signal.SIGINT]]  # one each


@pytest.mark.slow
def test_bench_jobs_in_real_processes_compile_only(tmp_path, monkeypatch):
    """Two compile-only searches at once, each in a `python -m cutegen.cli.bench_jobs` child."""
    _scale_shift_suite(tmp_path, monkeypatch, max_evals=1, tiers=("", "again"))
    out = tmp_path / "out"
    r = CliRunner().invoke(_cli(), ["bench", str(tmp_path / "suite.toml"), "--compile-only",
                                    "--jobs", "2", "--db", str(tmp_path / "b.db"), "--out",
                                    str(out), "--run-prefix", "p"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    tasks = json.loads((out / "bench.json").read_text())["tasks"]
    assert [t["status"] for t in tasks] == ["compiled", "compiled"], tasks
    assert {t["run"] for t in tasks} == {"p-scale_shift", "p-scale_shift-2"}
    assert all("finished" in p.read_text() for p in (out / "logs").glob("*.log"))


def test_bench_needs_a_gpu_unless_compile_only(tiny_suite, tmp_path, monkeypatch):
    monkeypatch.setattr("cutegen.codegen.backend.gpu_available", lambda: False)
    r = CliRunner().invoke(_cli(), ["bench", str(tiny_suite), "--db", str(tmp_path / "b.db")])
    assert isinstance(r.exception, GPURequiredError)
    assert "needs an NVIDIA GPU" in str(r.exception) and "--compile-only" in str(r.exception)
    r = CliRunner().invoke(_cli(), ["bench", "--db", str(tmp_path / "b.db")])
    assert isinstance(r.exception, ConfigError) and "tierA" in str(r.exception)


@pytest.mark.slow
def test_bench_compile_only_with_the_real_evaluator(tmp_path, monkeypatch):
    """CI's smoke run: a one-task suite, compile-only, through the real worker processes."""
    _scale_shift_suite(tmp_path, monkeypatch, max_evals=2, tiers=("",))
    out = tmp_path / "out"
    r = CliRunner().invoke(_cli(), ["bench", str(tmp_path / "suite.toml"), "--compile-only",
                                    "--db", str(tmp_path / "b.db"), "--out", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    (task,) = json.loads((out / "bench.json").read_text())["tasks"]
    assert task["task"] == "scale_shift" and task["status"] == "compiled"
    assert task["verdicts"].get("compiled", 0) >= 1
    assert "compiled only" in r.stdout and "not measured (--compile-only" in (
        out / "BENCHMARKS.md").read_text()


def test_roofline_fraction_uses_the_measured_ceilings(tmp_path):
    from cutegen.search.report.bench import bound_us

    c = Ceilings(4000.0, 800.0, 0, "test")
    assert bound_us(4 * 10**9, 0, c) == pytest.approx(1000.0)
    assert bound_us(0, 2 * 8192**3, c) == pytest.approx(2 * 8192**3 / 800e12 * 1e6)


@pytest.mark.gpu
def test_measure_ceilings_on_the_gpu():
    from cutegen.codegen.ceilings import measure_ceilings

    m = measure_ceilings(runs=30)
    assert 100 < m.copy_gbs < 20_000 and 10 < m.gemm_tflops < 5_000
    assert m.copy_bytes >= 2**30 and m.gemm_n == 8192 and m.gpu


def test_eager_with_cudnn_in_tf32_is_shown_beside_eager(fake_run, best_with_tf32):
    """A task running cuDNN convolutions gets eager as torch runs it by default (cuDNN in
    TF32) beside eager (fp32, the candidates' precision): in the result, the table's eager
    and speed-up cells, while the speed-up and the means stay against fp32 eager."""
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    best_with_tf32(s, run, 4.0)
    r = collect_task_result(s, run, SuiteTask("toy_bf16", "bf16", "A"), H200_MEASURED)
    s.close()
    assert r.eager_tf32_us == pytest.approx(r.eager_us / 4, rel=1e-6)
    assert r.speedup_eager_tf32 == pytest.approx(r.speedup_eager / 4, rel=1e-6)
    row = next(line for line in task_table([r]).splitlines() if line.startswith("| toy_bf16"))
    assert f"TF32 {r.eager_tf32_us:,.1f} µs" in row
    assert f"vs TF32 {r.speedup_eager_tf32:.2f}×" in row
    (g,) = summarize([r])
    assert g.eager_correct == pytest.approx(r.speedup_eager)
