"""Tolerance variants (``--atol`` / ``--rtol``, ``cutegen.codegen.variants``): the task held to
another tolerance as a task file of its own, read the same way by the trusted reference worker
(which runs the file: the last ``TOLERANCE`` wins) and by the report (which reads its text)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cutegen.codegen.tasks import declared_tolerance, load_task_file
from cutegen.codegen.variants import make_variant, tolerance_source, variant_dtype
from cutegen.errors import TaskError

torch = pytest.importorskip("torch")

TASK = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.tanh(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 32)]\n\n\n"
        "def get_init_inputs():\n    return []\n")


def _task(tmp_path: Path, text: str = TASK, name: str = "t"):
    (tmp_path / f"{name}.py").write_text(text)
    return load_task_file(tmp_path / f"{name}.py")


def test_the_variant_sets_tolerance_and_keeps_the_original_text(tmp_path):
    task = _task(tmp_path)
    v = make_variant(task, "native", tmp_path / "v", atol=0.01)
    assert v.source.startswith(TASK) and v.name == "t_atol0p01"
    assert v.path.parent == tmp_path / "v" / task.sha256[:12]
    assert declared_tolerance(v.source) == {"atol": 0.01}  # rtol: the dtype's row
    assert v.sha256 != task.sha256  # its runs are runs of their own
    again = make_variant(task, "native", tmp_path / "v", atol=0.01)
    assert again.path == v.path and again.sha256 == v.sha256
    both = make_variant(task, "native", tmp_path / "v", atol=1e-5, rtol=0.02)
    assert both.name == "t_atol1em05_rtol0p02"
    assert declared_tolerance(both.source) == {"atol": 1e-5, "rtol": 0.02}


def test_the_value_not_given_is_kept_from_the_tasks_own_tolerance(tmp_path):
    task = _task(tmp_path, TASK + '\nTOLERANCE = {"atol": 0.003, "rtol": 0.004}\n')
    v = make_variant(task, "native", tmp_path / "v", rtol=0.05)
    assert declared_tolerance(v.source) == {"atol": 0.003, "rtol": 0.05}


def test_with_a_precision_the_tolerance_comes_first_and_the_cast_still_applies(tmp_path):
    v = make_variant(_task(tmp_path), "bf16", tmp_path / "v", atol=0.05)
    assert v.name == "t_atol0p05_bf16"
    assert variant_dtype(v.source) == "bfloat16"  # families still build bf16 parameters
    assert declared_tolerance(v.source) == {"atol": 0.05}
    assert make_variant(_task(tmp_path), "bf16", tmp_path / "v").name == "t_bf16"


@pytest.mark.parametrize(("atol", "rtol", "match"), [
    (-1e-3, None, "atol must be a finite number >= 0"),
    (None, math.nan, "rtol must be a finite number >= 0"),
    (math.inf, None, "atol must be"),
])
def test_a_bad_tolerance_is_refused(tmp_path, atol, rtol, match):
    with pytest.raises(TaskError, match=match):
        make_variant(_task(tmp_path), "native", tmp_path / "v", atol=atol, rtol=rtol)
    with pytest.raises(TaskError, match="needs atol or rtol"):
        tolerance_source(TASK)


def test_declared_tolerance_reads_the_last_assignment_as_running_the_file_does():
    """Before, the report read the first TOLERANCE of the file; a variant appends one."""
    text = (TASK + '\nTOLERANCE = {"atol": 1e-3}\n' + '\nTOLERANCE = {"atol": 0.5, "rtol": 0.25}\n')
    assert declared_tolerance(text) == {"atol": 0.5, "rtol": 0.25}
    assert declared_tolerance(TASK) is None
    assert declared_tolerance(TASK + "\nTOLERANCE = make()\n") is None


def test_the_report_states_the_variants_tolerance(tmp_path):
    from cutegen.search.report.data import _task_tolerance

    v = make_variant(_task(tmp_path, TASK + '\nTOLERANCE = {"atol": 1e-3}\n'), "native",
                     tmp_path / "v", atol=0.5)
    assert _task_tolerance(str(v.path)) == {"atol": 0.5}


def test_the_reference_worker_holds_outputs_to_the_variants_tolerance(tmp_path):
    """The trusted reference worker runs the variant's file: an output 5e-3 off fails the
    task's fp32 1e-4 and passes the variant held to atol=1e-2."""
    from cutegen.codegen.eval.refworker import Reference
    from cutegen.codegen.numerics import compare

    task = _task(tmp_path)
    v = make_variant(task, "native", tmp_path / "v", atol=1e-2)
    ref64 = torch.linspace(-1, 1, 101, dtype=torch.float64)
    cand = [(ref64 + 5e-3).float()]
    for t, passes in ((task, False), (v, True)):
        ref = Reference(str(t.path), gpu=False, scratch=tmp_path)
        tol = ref.load(hidden=False, seed_init=0)["tolerance"]
        assert tol == (None if t is task else {"atol": 1e-2})
        assert compare(cand, [ref64], [ref64.float()], override=tol).passed is passes
        ref.close()


def test_cutegen_eval_and_search_hold_the_task_to_atol_rtol(tmp_path, monkeypatch, eval_sees):
    from click.testing import CliRunner

    from cutegen.cli.eval import eval_cmd
    from cutegen.cli.search import search_cmd

    seen = eval_sees
    (tmp_path / "t.py").write_text(TASK)
    (tmp_path / "cand.py").write_text("x = 1\n")
    r = CliRunner().invoke(eval_cmd, [str(tmp_path / "t.py"), str(tmp_path / "cand.py"),
                                      "--atol", "0.01", "--rtol", "0.02", "--compile-only",
                                      "--run-dir", str(tmp_path / "run")])
    assert len(seen) == 1, r.output
    assert seen[0].name == "t_atol0p01_rtol0p02"
    assert declared_tolerance(seen[0].source) == {"atol": 0.01, "rtol": 0.02}
    assert "held to atol=0.01, rtol=0.02" in r.output

    r = CliRunner().invoke(eval_cmd, [str(tmp_path / "t.py"), str(tmp_path / "cand.py"),
                                      "--atol", "-1", "--compile-only"])
    assert r.exit_code == 2 and "--atol" in r.output  # refused before anything runs

    import cutegen.api
    import cutegen.cli.search as search_mod

    class Run:
        name = "tol"

    created = []
    monkeypatch.setattr(cutegen.api, "create_run",
                        lambda task, settings, **kw: created.append(task) or Run())
    monkeypatch.setattr(search_mod, "run_with_progress", lambda run, db: None)
    db = tmp_path / "runs" / "c.db"
    r = CliRunner().invoke(search_cmd, [str(tmp_path / "t.py"), "--rtol", "0.001",
                                        "--compile-only", "--max-evals", "1", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "t_rtol0p001: the task held to rtol=0.001" in r.output
    (task,) = created
    assert task.path.parent.parent == tmp_path / "runs" / "variants"
    assert declared_tolerance(task.source) == {"rtol": 0.001}


def test_a_suite_held_to_another_tolerance(tmp_path, kb_two):
    """``cutegen bench --atol``: every task replaced by its tolerance variant, a bf16 task as
    well (already in the dtype asked, but not at the tolerance asked)."""
    from cutegen.codegen.suites import kernelbench_suite, with_precision

    kb = kernelbench_suite(kb_two(TASK, "64, 32"), 1)
    s = with_precision(kb, "native", tmp_path / "v", atol=0.01)
    assert s.name == "kernelbench-L1-atol0.01" and "held to atol=0.01" in s.description
    toy, b16 = s.tasks
    assert (toy.dtype, b16.dtype) == ("fp32", "bf16")
    assert toy.label == "kb_L1_P3_Toy_atol0p01" and b16.label == "kb_L1_P6_Bf16_atol0p01"
    assert declared_tolerance(load_task_file(b16.task).source) == {"atol": 0.01}
    s = with_precision(kb, "bf16", tmp_path / "v", rtol=0.1)
    assert s.name == "kernelbench-L1-bf16-rtol0.1"
    toy, b16 = s.tasks
    assert toy.label == "kb_L1_P3_Toy_rtol0p1_bf16" and toy.dtype == "bf16"
    assert b16.label == "kb_L1_P6_Bf16_rtol0p1"  # no second cast
    assert variant_dtype(load_task_file(b16.task).source) is None
