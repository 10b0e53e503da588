"""Shared data for the kernel-family tests (each test module loads this file once per
session under the name ``_cutegen_famdata``, so its caches are shared).

``tasks/`` holds extra covered tasks (fused prologues / epilogues, other row ops, scan
variants, pointwise chains over several inputs); ``negative/`` holds tasks no family covers;
``gemm_tasks/`` holds small matrix-product tasks (``rec_*``: recognition cases, ``rec_neg_*``
not covered; other files belong to the GEMM kernel's tests); ``conv_tasks/`` the same for
convolutions.
Recognition runs in the pytest process (``in_process``: the tasks are ours); the DSL is only
ever imported by the compile driver's child processes.
"""

from __future__ import annotations

import ast
import importlib.util
import uuid
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUNDLED = ROOT / "benchmarks" / "tasks"
TASKS = HERE / "tasks"
NEGATIVE = HERE / "negative"
GEMM_TASKS = HERE / "gemm_tasks"
CONV_TASKS = HERE / "conv_tasks"

#: Bundled tasks a family covers: name -> (family, op).
BUNDLED_COVERED = {
    "softmax_fp32": ("row", "softmax"), "softmax_bf16": ("row", "softmax"),
    "softmax_long_bf16": ("row", "softmax"),
    "log_softmax_fp32": ("row", "log_softmax"), "log_softmax_bf16": ("row", "log_softmax"),
    "layernorm_fp32": ("row", "layer_norm"), "layernorm_bf16": ("row", "layer_norm"),
    "rmsnorm_fp32": ("row", "rms_norm"), "rmsnorm_bf16": ("row", "rms_norm"),
    "cross_entropy_fp32": ("row", "cross_entropy"), "cross_entropy_bf16": ("row", "cross_entropy"),
    "sum_rows_fp32": ("row", "sum"), "sum_rows_bf16": ("row", "sum"),
    "cumsum_fp32": ("scan", "cumsum"), "cumsum_bf16": ("scan", "cumsum"),
    "gelu_scale_bias_fp32": ("pointwise", "pointwise"),
    "gelu_scale_bias_bf16": ("pointwise", "pointwise"),
    "softmax_1024_bf16": ("row", "softmax"), "softmax_16384_bf16": ("row", "softmax"),
    "rmsnorm_1024_bf16": ("row", "rms_norm"), "rmsnorm_16384_bf16": ("row", "rms_norm"),
    "cross_entropy_long_bf16": ("row", "cross_entropy"),
    "gelu_tanh_bf16": ("pointwise", "pointwise"), "silu_bf16": ("pointwise", "pointwise"),
    "relu_bf16": ("pointwise", "pointwise"),
}
#: Bundled tasks the gemm family covers (their expected plans: test_gemm_recognize.py).
BUNDLED_GEMM = ("bmm_bf16", "gemm_16384x1024x4096_bf16", "gemm_4096_bf16",
                "gemm_8192x8192x1024_bf16", "gemm_at_b_bf16", "gemm_bf16", "gemm_bias_gelu_bf16",
                "gemm_bias_relu_bf16", "gemm_bias_relu_fp32", "gemm_fp32",
                "gemm_scale_residual_bf16", "gemm_swish_bf16")
#: Bundled tasks the conv family covers (their expected plans: test_conv.py).
BUNDLED_CONV = tuple(sorted(p.stem for p in BUNDLED.glob("conv*.py")))
#: Bundled tasks no family covers, and the op the message must name (none today: the
#: messages are checked on the tasks in negative/).
BUNDLED_NOT_COVERED: dict[str, str] = {}


def task_path(name: str) -> Path:
    for folder in (BUNDLED, TASKS, NEGATIVE, GEMM_TASKS, CONV_TASKS):
        p = folder / f"{name}.py"
        if p.is_file():
            return p
    raise FileNotFoundError(name)


def covered_task_names() -> list[str]:
    """Every covered task: the bundled ones, then ours."""
    return sorted(BUNDLED_COVERED) + sorted(p.stem for p in TASKS.glob("*.py"))


@cache
def recognition(name: str):
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize

    return recognize(capture_in_process(task_path(name)))


@cache
def plan_of(name: str):
    rec = recognition(name)
    assert rec.covered, rec.not_covered
    return rec.plans[0]


def variants(name: str) -> list[tuple[str, bool]]:
    """(strategy, fused) pairs the family offers for a task."""
    from cutegen.codegen.families.render import can_split, knobs

    plan = plan_of(name)
    values, choices = knobs(plan)
    out = [(s, True) for s in choices["strategy"]]
    if can_split(plan):
        out.append((values["strategy"], False))
    return out


def offers_fast_math(name: str) -> bool:
    """Whether the task's family candidate has the ``fast_math`` knob."""
    from cutegen.codegen.families.render import knobs

    return "fast_math" in knobs(plan_of(name))[1]


@cache
def rendered(name: str, strategy: str | None = None, fused: bool = True,
             extra: tuple[tuple[str, object], ...] = ()) -> str:
    from cutegen.codegen.families.render import render

    tun = dict(extra)
    if strategy is not None:
        tun["strategy"] = strategy
    return render(plan_of(name), task_path(name).read_text(), tunables=tun, fused=fused)


def _globals(path: Path) -> dict:
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def shapes(name: str, *, max_rows: int = 512) -> list[dict]:
    """The task's main shape (leading size capped at ``max_rows``: compiling does not depend
    on the row count beyond "few rows or many") and its VERIFY_SHAPES, as compile cases
    ``{"label", "init", "inputs": [{"shape", "dtype"}]}``."""
    import torch

    path = task_path(name)
    g = _globals(path)
    main = {k: v for k, v in g.items() if isinstance(v, int) and not isinstance(v, bool)}
    if "batch_size" in main:
        main["batch_size"] = min(main["batch_size"], max_rows)
    overrides = [main] + [dict(main, **v) for v in g.get("VERIFY_SHAPES", [])]
    spec = importlib.util.spec_from_file_location(f"_famtask_{uuid.uuid4().hex[:8]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = []
    for ov in overrides:
        for k, v in ov.items():
            setattr(module, k, v)
        with torch.device("meta"):
            inputs = module.get_inputs()
        init = list(module.get_init_inputs())
        specs = [{"shape": list(t.shape), "dtype": str(t.dtype)[6:]} for t in inputs]
        label = "x".join(str(s) for s in inputs[0].shape)
        out.append({"label": label, "init": init, "inputs": specs})
    return out



def compile_jobs(jobs: list[dict], root: Path, n_cases: int) -> list[dict]:
    """Compile ``jobs`` (``{"file", "init", "inputs", "index"}``) for sm_90a in two child
    processes of ``family_compile_driver.py`` at once; one result per case index."""
    import json
    import os
    import subprocess
    import sys

    halves = [jobs[0::2], jobs[1::2]]
    procs = []
    for k, half in enumerate(halves):
        cases_file = root / f"cases_{k}.json"
        cases_file.write_text(json.dumps(half))
        dump = root / f"dump_{k}"
        dump.mkdir(exist_ok=True)
        env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx,cubin,sass",
                   CUTE_DSL_DUMP_DIR=str(dump), CUTE_DSL_NO_CACHE="1")
        procs.append(subprocess.Popen(
            [sys.executable, str(HERE / "family_compile_driver.py"), str(cases_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    out: list = [None] * n_cases
    for half, proc in zip(halves, procs, strict=True):
        stdout, stderr = proc.communicate(timeout=1800)
        assert proc.returncode == 0, stderr[-4000:]
        results = json.loads(stdout.strip().splitlines()[-1])["cases"]
        for job, res in zip(half, results, strict=True):
            out[job["index"]] = res
    return out
