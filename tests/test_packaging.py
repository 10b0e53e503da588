"""The one-import-name layout (STYLE.md §1) and its traps, guarded."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_on_disk_is_declared_in_pyproject():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = set()
    for top, name in (("cutegen", ""), ("search", "search"), ("codegen", "codegen"),
                      ("profilers", "profilers"), ("plugins", "plugins"),
                      ("benchmarks", "benchmarks")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            on_disk.add(".".join(p for p in ("cutegen", name, *rel) if p))
    assert on_disk == set(cfg["packages"])


@pytest.mark.slow
def test_wheel_holds_only_cutegen_and_its_data(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (whl,) = tmp_path.glob("cutegen-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"cutegen", next(t for t in tops if t.endswith(".dist-info"))}
    for must in ("cutegen/codegen/prompts/primer.md", "cutegen/benchmarks/tasks/softmax_bf16.py",
                 "cutegen/benchmarks/seeds/softmax.py", "cutegen/codegen/llm/client.py",
                 "cutegen/search/storage/_sqlite.py", "cutegen/py.typed"):
        assert must in names, must
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)


def test_every_command_has_help():
    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    assert {"tasks", "eval", "search", "resume", "status", "show", "plugins",
            "export-traces"} <= set(cli.commands)
    for name, cmd in cli.commands.items():
        r = CliRunner().invoke(cli, [name, "--help"])
        assert r.exit_code == 0 and "Usage" in r.output, name
        assert cmd.help and len(cmd.help) > 40, name


def test_tasks_lists_the_bundled_suite():
    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    r = CliRunner().invoke(cli, ["tasks", "--json"])
    names = {t["name"] for t in __import__("json").loads(r.output)}
    need = {"softmax_fp32", "softmax_bf16", "log_softmax_bf16", "layernorm_bf16", "rmsnorm_bf16",
            "cross_entropy_bf16", "gelu_scale_bias_bf16", "sum_rows_bf16", "cumsum_fp32",
            "gemm_bf16", "gemm_bias_relu_bf16"}
    assert need <= names


def test_task_descriptions_end_on_a_sentence_or_say_they_are_cut():
    """``cutegen tasks`` showed each docstring's first line, most of them cut mid-sentence
    ("... spelled as the cumsum of the input shifted right by"); now the first sentence,
    joined over lines, cut at a word with an ellipsis past the width."""
    from cutegen.cli.eval import task_summary

    doc = ("Exclusive cumulative sum along the rows, spelled as the cumsum of the input\n"
           "shifted right by one. More detail\nhere.\n\nA second paragraph.")
    assert task_summary(doc) == ("Exclusive cumulative sum along the rows, spelled as the "
                                 "cumsum of the input shifted right by one.")
    assert task_summary("No sentence end in the first paragraph\n\nNext.") == (
        "No sentence end in the first paragraph")
    long = task_summary("word " * 40 + "end.", width=30)
    assert long.endswith("…") and len(long) <= 30 and " wor…" not in long
    assert task_summary("") == ""
    assert task_summary("x" * 50, width=20) == "x" * 19 + "…"  # one long word


def test_eval_without_gpu_says_so_plainly(tmp_path):
    from cutegen.cli import main
    from cutegen.codegen.backend import gpu_available

    if gpu_available():
        pytest.skip("a GPU is visible")
    cand = tmp_path / "c.py"
    cand.write_text("class ModelNew: pass\n")
    r = subprocess.run([sys.executable, "-m", "cutegen", "eval", "softmax_bf16", str(cand)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 4 and "needs an NVIDIA GPU" in r.stderr and "--compile-only" in r.stderr
    assert main is not None


def test_bad_task_spec_errors():
    from cutegen.codegen.tasks import resolve_task
    from cutegen.errors import TaskError

    with pytest.raises(TaskError, match="no bundled task named"):
        resolve_task("softmaxx")
    with pytest.raises(TaskError, match="not found"):
        resolve_task("/nonexistent/task.py")
    with pytest.raises(TaskError, match="--level and --problem"):
        resolve_task(None, kernelbench="/x")


def test_task_file_problems_are_named(tmp_path):
    from cutegen.codegen.tasks import load_kernelbench_task, load_task_file
    from cutegen.errors import TaskError

    p = tmp_path / "t.py"
    p.write_text("def get_inputs(:\n")
    with pytest.raises(TaskError, match="syntax error at line 1"):
        load_task_file(p)
    p.write_text("class Model: pass\ndef get_inputs(): return []\n")
    with pytest.raises(TaskError, match="missing get_init_inputs"):
        load_task_file(p)
    kb = tmp_path / "KernelBench" / "level1"
    kb.mkdir(parents=True)
    (kb / "23_Softmax.py").write_text((ROOT / "benchmarks/tasks/softmax_fp32.py").read_text())
    assert load_kernelbench_task(tmp_path, 1, 23).name == "kb_L1_P23_Softmax"
    with pytest.raises(TaskError, match="no problem 24"):
        load_kernelbench_task(tmp_path, 1, 24)


def test_development_scripts_stay_out_of_the_package():
    """benchmarks/ ships data only (tasks, seeds, suites); scripts live in tools/, which
    is not a package and not installed."""
    shipped = sorted(p.name for p in (ROOT / "benchmarks").iterdir() if p.is_file())
    assert shipped == ["__init__.py"]
    assert (ROOT / "tools" / "gpu_checks.sh").is_file()
    assert not (ROOT / "tools" / "__init__.py").exists()
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "tools" not in cfg["package-dir"].values()


def test_every_tool_script_starts():
    """Each script in tools/ imports what it needs and answers ``--help`` (two imported
    modules that moved out of the package when the scripts did, and nothing said so until a
    GPU session tried them)."""
    scripts = sorted((ROOT / "tools").glob("*.py"))
    assert scripts
    procs = {p.name: subprocess.Popen([sys.executable, str(p), "--help"], cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in scripts}
    failed = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        if proc.returncode != 0 or "usage:" not in out:
            failed[name] = err[-500:]
    assert not failed, failed
    for script in sorted((ROOT / "tools").glob("*.sh")):  # the shell ones at least parse
        sh = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert sh.returncode == 0, (script.name, sh.stderr)


def _packed_run(out: Path, step: str, cwd: Path) -> list[str]:
    """gpu_checks.sh run with GPU_CHECKS_PACK=1 into ``out``: what its archive holds (and
    that nothing but the archive and steps.log is left beside it)."""
    import tarfile

    run = subprocess.run(["bash", str(ROOT / "tools" / "gpu_checks.sh"), str(out), step],
                         capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "GPU_CHECKS_PACK": "1"})
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["checks.tgz", "steps.log"]
    with tarfile.open(out / "checks.tgz") as tar:
        return tar.getnames()


def test_gpu_checks_can_pack_its_output(tmp_path):
    """The device tool brings back at most 8 files (on 2026-12-02 the family summaries of a
    run were lost): GPU_CHECKS_PACK=1 leaves steps.log and one archive of everything."""
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    for i in range(10):
        (out / "sub" / f"summary-{i}.jsonl").write_text("{}\n")
    names = _packed_run(out, "no-such-step", tmp_path)
    assert "./sub/summary-9.jsonl" in names and "./steps.log" in names
    assert "unknown step: no-such-step" in (out / "steps.log").read_text()
    # a second run into the same folder (two gpu_checks calls in one device command) keeps
    # the first's files in its archive: before, they were deleted with the old archive
    (out / "second.log").write_text("x\n")
    names = _packed_run(out, "other-step", tmp_path)
    assert {"./sub/summary-9.jsonl", "./second.log", "./steps.log"} <= set(names)
    assert "./checks.tgz" not in names


def test_gpu_checks_selections_parse():
    """Every literal ``-k`` expression in gpu_checks.sh is one pytest accepts (on 2026-12-04
    the direct-alt step's ``-k "plan=1 or ..."`` ended a GPU call at collection: ``=`` is not
    part of pytest's expression language, and nothing ran)."""
    import re

    from _pytest.mark.expression import Expression

    text = (ROOT / "tools" / "gpu_checks.sh").read_text()
    exprs = re.findall(r'-k\s+"([^"$]+)"', text) + re.findall(r"-k\s+([\w-]+)\s", text)
    assert len(exprs) > 20
    bad = {}
    for e in exprs:
        try:
            Expression.compile(e)
        except Exception as err:  # noqa: BLE001 (the error's class moved between pytest versions)
            bad[e] = str(err)
    assert not bad, bad


def test_kb_compile_resumes_a_sweep_from_its_json(tmp_path, monkeypatch, capsys):
    """tools/kb_compile.py (a ~40 minute sweep on two cores) rewrites its --json after every
    task, and --resume compiles only the tasks that file does not hold: before, a sweep
    stopped part-way started over."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("kb_compile", ROOT / "tools" / "kb_compile.py")
    tool = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(tool)
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    for name in ("1_A.py", "2_B.py", "10_C.py"):
        (kb / "level1" / name).write_text("")
    seen: list[str] = []

    def fake_one(path, workdir, max_gib):
        seen.append(path.name)
        if path.name == "2_B.py" and "1_A.py" in seen:
            raise KeyboardInterrupt  # the sweep stopped part-way, after one row
        return {"task": path.name, "shapes": 3, "compiled": 3, "kernels": 1, "errors": [],
                "skipped": []}

    monkeypatch.setattr(tool, "one", fake_one)
    out = tmp_path / "rows.json"
    with pytest.raises(KeyboardInterrupt):
        tool.main([str(kb), "--levels", "1", "--jobs", "1", "--json", str(out)])
    assert [r["task"] for r in json.loads(out.read_text())] == ["1_A.py"]
    seen.clear()
    assert tool.main([str(kb), "--levels", "1", "--jobs", "1", "--json", str(out),
                      "--resume"]) == 0
    assert seen == ["2_B.py", "10_C.py"]  # the kept task is not compiled again
    rows = json.loads(out.read_text())
    assert [r["task"] for r in rows] == ["1_A.py", "2_B.py", "10_C.py"]
    printed = capsys.readouterr().out
    assert "1 tasks kept" in printed and "3 tasks: 3 compiled at every shape" in printed
    # a row with an error is compiled again on the next resume, the others kept
    rows[1]["errors"] = ["RuntimeError: killed"]
    out.write_text(json.dumps(rows))
    seen.clear()
    assert tool.main([str(kb), "--levels", "1", "--jobs", "1", "--json", str(out),
                      "--resume"]) == 0
    assert seen == ["2_B.py"]
    assert not any(r["errors"] for r in json.loads(out.read_text()))
    with pytest.raises(SystemExit):  # --resume without the file it keeps rows from
        tool.main([str(kb), "--resume"])


def test_kb_compile_skips_a_hidden_shape_whose_reference_raises(tmp_path):
    """A hidden shape at which the task's own forward raises (KernelBench L1 100: targets of
    the batch's length broadcast along the columns, so only batch == columns runs) is skipped
    by the evaluator; tools/kb_compile.py compiled the candidate there anyway and reported the
    candidate's error as a failure. Now the shape is skipped with the reason; a shape where
    the forward runs is kept, and the main shape is never skipped."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kb_compile", ROOT / "tools" / "kb_compile.py")
    tool = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(tool)
    task = tmp_path / "100_Hinge.py"
    task.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, p, t):\n"
        "        return torch.mean(torch.clamp(1 - p * t, min=0))\n"
        "batch_size = 64\n"
        "cols = 64\n"
        "def get_inputs():\n"
        "    return [torch.rand(batch_size, cols), torch.rand(batch_size)]\n"
        "def get_init_inputs():\n"
        "    return []\n")
    got = {label: why for label, _, _, why in tool._shapes(task)}
    assert got["main"] == ""
    assert got["batch_size=1"] == ""  # (1, 64) * (1,) broadcasts
    hidden = [lbl for lbl in got if lbl not in ("main", "batch_size=1")]
    assert len(hidden) == 1 and got[hidden[0]].startswith("reference raised RuntimeError")
