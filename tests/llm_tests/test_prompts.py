"""Prompts: the strict renderer, the section builders, golden files of every prompt kind,
and the primer's example compiling with the real CuTe DSL for sm_90a.

Regenerate the golden files on purpose with
``CUTEGEN_REGEN_GOLDEN=1 pytest tests/llm_tests/test_prompts.py``, then read the diff.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cutegen.codegen import candidate as candidate_module
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Roofline, Stage, Timing, TrialResult, Verdict
from cutegen.codegen.prompting import (
    PromptError,
    clip,
    focus_hints,
    format_evaluation,
    format_findings,
    format_lessons,
    initial_prompt,
    render,
    repair_prompt,
    rewrite_prompt,
    system_message,
    template_text,
    template_variables,
)
from cutegen.codegen.rewriters.base import LessonView, RewriteContext
from cutegen.codegen.tasks import Task

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "prompts"
REGEN = os.environ.get("CUTEGEN_REGEN_GOLDEN") == "1"

TASK_SOURCE = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    batch_size = 4096
    dim = 1024


    class Model(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return []
    ''')
TASK = Task(name="toy_softmax", path=Path("/nonexistent/toy_softmax.py"), source=TASK_SOURCE)
PARENT = CandidateSource(textwrap.dedent('''\
    import torch
    import cutlass.cute as cute

    TUNABLES = {"threads": 128}


    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return x
    '''), origin="llm:test")


def _timing(us: float) -> Timing:
    return Timing(median_us=us, p10_us=us * 0.98, p90_us=us * 1.03, n=50)


EV_CORRECT = Evaluation(
    candidate_sha256=PARENT.sha256, task_sha256=TASK.sha256, stage=Stage.BENCHMARK,
    verdict=Verdict.CORRECT, message="correct on 9 trials",
    trials=(TrialResult("main/randn", True, max_abs_err=1e-7),),
    timing=_timing(40.0), eager=_timing(52.0), compiled=_timing(45.0),
    roofline=Roofline(bytes_moved=33_554_432, flops=0, bound_us=8.0, kind="memory",
                      bandwidth_gbs=4200.0, peak_tflops=990.0))
EV_WRONG = Evaluation(
    candidate_sha256=PARENT.sha256, task_sha256=TASK.sha256, stage=Stage.VERIFY,
    verdict=Verdict.WRONG, message="1 of 3 trials failed",
    trials=(TrialResult("main/randn", True),
            TrialResult("batch_size=127/uniform", False, "values differ", 0.5, 2.0, 0.1, 1e-7),
            TrialResult("main/large", True)))
EV_COMPILE = Evaluation(
    candidate_sha256=PARENT.sha256, task_sha256=TASK.sha256, stage=Stage.COMPILE,
    verdict=Verdict.COMPILE_ERROR, message="cute.compile failed",
    details=("error[TYPE_UNSTABLE_JOIN]: `s` has type `Int32` on one path and `Float32` on "
             "another.",))
LESSONS = (
    LessonView("tunable", "threads 128->256", "faster", 1.31, "toy_softmax",
               "threads 128->256 on a row softmax: 1.31x faster"),
    LessonView("llm_rewrite", "vectorize", "compile_error", None, "other_task",
               "llm_rewrite (vectorize) did not compile"),
)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; regenerate with CUTEGEN_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"prompt {name!r} changed; if on purpose, regenerate with CUTEGEN_REGEN_GOLDEN=1")


# -- the renderer ------------------------------------------------------------------------
def test_render_refuses_missing_and_unexpected_variables():
    kinds = dict(task_name="t", task_source="s", broken_source="b", compile_error="e",
                 round="1", max_rounds="2")
    assert "t" in render("repair", **kinds)
    with pytest.raises(PromptError, match="missing \\['max_rounds'\\]"):
        render("repair", **{k: v for k, v in kinds.items() if k != "max_rounds"})
    with pytest.raises(PromptError, match="unexpected \\['bogus'\\]"):
        render("repair", bogus="x", **kinds)
    with pytest.raises(PromptError, match="not found"):
        render("no_such_template")


def test_a_stray_dollar_in_a_template_is_an_error():
    with pytest.raises(PromptError, match="invalid"):
        template_variables("price: $ 5")
    assert template_variables("a ${x} $y $$z") == {"x", "y"}


def test_fragments_hold_no_variables():
    for name in ("primer", "contract", "output"):
        assert "${" not in template_text(name), name


def test_focus_hints_parse_and_are_unique():
    for purpose in ("initial", "rewrite"):
        hints = focus_hints(purpose)
        assert len(hints) >= 3
        assert len({h.key for h in hints}) == len(hints)


def test_the_contract_prompt_covers_the_contract_in_candidate_py():
    doc, prompt = candidate_module.__doc__ or "", template_text("contract")
    for term in ("ModelNew", "state_dict", "TUNABLES", "TUNABLE_CHOICES", "PRECISION",
                 "cute.compile", "cutegen"):
        assert term in doc and term in prompt, term


# -- section builders ---------------------------------------------------------------------
def test_evaluation_sections_quote_the_numbers():
    text = format_evaluation(EV_CORRECT)
    assert "40.0 us" in text and "speedup 1.30x" in text and "speedup 1.12x" in text
    assert "20% of it" in text
    wrong = format_evaluation(EV_WRONG)
    assert "2 of 3 trials passed" in wrong and "FAILED batch_size=127/uniform" in wrong
    assert "max_abs_err=0.5" in wrong
    assert "TYPE_UNSTABLE_JOIN" in format_evaluation(EV_COMPILE)
    assert format_evaluation(None) == "Not evaluated yet."


def test_empty_sections_are_empty():
    assert format_findings(()) == "" and format_lessons((), "t") == ""


def test_clip_keeps_head_and_tail():
    text = "HEAD" + "x" * 10_000 + "TAIL"
    out = clip(text, 200)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "omitted" in out
    assert len(out) < 300


# -- golden files --------------------------------------------------------------------------
def test_golden_system():
    check_golden("system", system_message())


def test_golden_initial():
    p = initial_prompt(TASK, focus=focus_hints("initial")[0], lessons=LESSONS)
    check_golden("initial", p.user)
    assert p.system == system_message()


@pytest.mark.parametrize(("name", "ev"), [("rewrite_correct", EV_CORRECT),
                                          ("rewrite_wrong", EV_WRONG),
                                          ("rewrite_compile_error", EV_COMPILE)])
def test_golden_rewrite(name, ev):
    from cutegen.profilers import Finding

    findings = (Finding("hint.dram", 45.0,
                        "dram__throughput 45% of peak: the kernel is latency-bound"),) \
        if ev is EV_CORRECT else ()
    ctx = RewriteContext(task=TASK, parent=PARENT, evaluation=ev, findings=findings,
                         lessons=LESSONS if ev is EV_CORRECT else ())
    check_golden(name, rewrite_prompt(ctx, focus=focus_hints("rewrite")[0]).user)


def test_golden_repair():
    p = repair_prompt(TASK, PARENT.code, EV_COMPILE.details[0], round_no=1, max_rounds=2)
    check_golden("repair", p.user)


def test_rewrite_needs_a_parent():
    with pytest.raises(PromptError):
        rewrite_prompt(RewriteContext(task=TASK), focus=focus_hints("rewrite")[0])


# -- the primer's code compiles ------------------------------------------------------------
_PRIMER_DRIVER = textwrap.dedent('''\
    import runpy, sys, torch
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack, make_fake_stream
    g = runpy.run_path(sys.argv[1])
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(127, 1000, dtype=dt)
        y = torch.empty_like(x)
        cute.compile(g["softmax"], from_dlpack(x, assumed_align=16),
                     from_dlpack(y, assumed_align=16), make_fake_stream(), 256)
    assert hasattr(g["ModelNew"], "forward")
    print("compiled")
    ''')


@pytest.mark.slow
def test_the_primer_example_compiles_for_sm90a(tmp_path):
    pytest.importorskip("cutlass")
    pytest.importorskip("torch")
    primer = template_text("primer")
    blocks = re.findall(r"```python\n(.*?)```", primer, flags=re.S)
    imports = "\n".join(line for line in blocks[0].splitlines()
                        if line.startswith(("import ", "from ")))
    example = tmp_path / "primer_example.py"
    example.write_text(imports + "\n\n\n" + blocks[-1], encoding="utf-8")
    driver = tmp_path / "driver.py"
    driver.write_text(_PRIMER_DRIVER, encoding="utf-8")
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a"}
    out = subprocess.run([sys.executable, str(driver), str(example)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]
