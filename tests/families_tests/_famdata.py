"""Shared data for the kernel-family tests (each test module loads this file once per
session under the name ``_cutegen_famdata``, so its caches are shared).

``tasks/`` holds extra covered tasks (fused prologues / epilogues, other row ops, scan
variants, pointwise chains over several inputs); ``negative/`` holds tasks no family covers;
``gemm_tasks/`` holds small matrix-product tasks (``rec_*``: recognition cases, ``rec_neg_*``
not covered; other files belong to the GEMM kernel's tests); ``reduce_tasks/`` holds small
reductions over any dims, norms and the two recognition bugs' tasks (issue 19);
``conv_tasks/`` the same for convolutions.
Recognition runs in the pytest process (``in_process``: the tasks are ours); the DSL is only
ever imported by the compile driver's child processes.
"""

from __future__ import annotations

import ast
import importlib.util
import uuid
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUNDLED = ROOT / "benchmarks" / "tasks"
TASKS = HERE / "tasks"
NEGATIVE = HERE / "negative"
GEMM_TASKS = HERE / "gemm_tasks"
REDUCE_TASKS = HERE / "reduce_tasks"
GEMM19_TASKS = HERE / "gemm19_tasks"
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
                "gemm_scale_residual_bf16", "gemm_swish_bf16", "gemm_skinny_bf16",
                "linear_mish_mish_fp32", "linear_scale_leakyrelu_fp32",
                "linear_skinny_gelu_fp32")
#: Bundled reductions over any dims and norms (issue 19): name -> (family, op, prologue ops,
#: epilogue ops), as ``Chain.describe`` lists them.
BUNDLED_REDUCE = {
    "sum_dim1_fp32": ("strided", "sum", "-", "-"),
    "mean_dim1_bf16": ("strided", "mean", "-", "-"),
    "amax_dim0_fp32": ("strided", "amax", "-", "-"),
    "argmin_dim1_bf16": ("strided", "argmin", "-", "-"),
    "var_dim1_fp32": ("strided", "var", "-", "-"),
    "std_rows_bf16": ("row", "std", "-", "-"),
    "sum_dims02_fp32": ("strided", "sum", "-", "-"),
    "mean_all_fp32": ("row", "mean", "-", "-"),
    "hinge_loss_fp32": ("row", "mean", "mul, sub, clamp", "-"),
    "rmsnorm_channels_fp32": ("strided", "mean", "pow", "add, sqrt, div"),
    "rmsnorm_channels_bf16": ("strided", "mean", "cast, pow",
                              "cast, add, rsqrt, mul, cast, mul"),
    "l2norm_rows_fp32": ("row", "sum", "square", "sqrt, div"),
    "l1norm_rows_bf16": ("row", "sum", "abs", "div"),
    "normalize_channels_fp32": ("strided", "sum", "square", "sqrt, clamp, div"),
    "group_norm_bf16": ("row", "group_norm", "-", "-"),
    "instance_norm_fp32": ("row", "layer_norm", "-", "-"),
    "batch_norm_fp32": ("batchnorm", "batch_norm", "-", "mul, add"),
    "batch_norm_eval_bf16": ("pointwise", "pointwise", "sub, add, rsqrt, mul, mul, add, relu",
                             "-"),
    "frobenius_norm_fp32": ("reduce_map", "sum", "square", "sqrt, div"),
    "batch_center_fp32": ("reduce_map", "mean", "-", "sub"),
    "smooth_l1_loss_fp32": ("row", "mean", "sub, abs, square, mul, sub, lt, where", "-"),
    "kl_div_bf16": ("row", "mean", "log, log, sub, mul, eq, where", "-"),
    "cumsum_exclusive_fp32": ("scan", "cumsum", "-", "-"),
    "cumsum_exclusive_cut_fp32": ("scan", "cumsum", "-", "-"),
    "cumsum_exclusive_cat_bf16": ("scan", "cumsum", "-", "-"),
    "matvec_fp32": ("row", "sum", "mul", "-"),
    "cosine_loss_fp32": ("chain", "sum+sum+sum+mean", "-", "-"),
    "triplet_loss_fp32": ("chain", "sum+sum+mean", "-", "-"),
    "selu_bf16": ("pointwise", "pointwise", "selu", "-"),
    "masked_scale_fp32": ("pointwise", "pointwise", "where, mul", "-"),
    "max_pool2d_fp32": ("pool", "max_pool", "-", "-"),
    "max_pool2d_dilated_bf16": ("pool", "max_pool", "-", "-"),
    "avg_pool2d_fp32": ("pool", "avg_pool", "-", "-"),
    "avg_pool2d_wide_fp32": ("pool", "avg_pool", "-", "-"),
    "avg_pool1d_fp32": ("pool", "avg_pool", "-", "-"),
    "max_pool1d_bf16": ("pool", "max_pool", "-", "-"),
    "max_pool3d_fp32": ("pool", "max_pool", "-", "-"),
    "avg_pool3d_bf16": ("pool", "avg_pool", "-", "-"),
    "global_avg_pool_bf16": ("row", "mean", "-", "-"),
}
#: Bundled GEMM tasks of issue 19 (tril / triu of the product, einsum, ops after the row
#: reduction): name -> the description's distinctive part.
BUNDLED_GEMM19 = {
    "tril_matmul_bf16": "torch.tril of the result",
    "triu_matmul_fp32": "torch.triu of the result",
    "einsum_bmm_bf16": "einsum (bij,bjk->bik)",
    "gemm_lse_mish_bf16": "then logsumexp over N, then mish",
    "gemm_bn_gelu_gn_mean_relu_fp32": "chain of 4 kernels",
    "gemm_gn_swish_bf16": "chain of 3 kernels",
    "rmsnorm_linear_gelu_bf16": "chain of 2 kernels",
}
#: Bundled tasks of the "long" suite (issue 17's rows too long for one CTA): recognized
#: here; outside the CPU compile and GPU variant sweeps (too large), with cases of their own
#: there (the default and the row slice kept in shared memory).
BUNDLED_LONG = {"softmax_393k_fp32": ("row", "softmax"),
                "log_softmax_393k_fp32": ("row", "log_softmax"),
                "layernorm_4m_fp32": ("row", "layer_norm"),
                "group_norm_2m_fp32": ("row", "group_norm")}
#: Bundled tasks the conv family covers (their expected plans: test_conv.py).
BUNDLED_CONV = tuple(sorted(p.stem for p in BUNDLED.glob("conv*.py")))
#: Bundled tasks whose forward goes on past what the conv family computes: a chain, the conv
#: kernel up to the cut (chains.conv_then), then the other families' kernels on what it wrote:
#: name -> ((conv stage's tail ops), (family, description words) of each later kernel).
BUNDLED_CONV_CHAINS = {
    "conv2d_avgpool_sigmoid_sum_fp32": (("avg_pool",), (("row", "sum over the last 3 dim"),)),
    "conv3d_groupnorm_mean_bf16": (("group_norm",), (("row", "mean over the last 4 dim"),)),
    "conv_transpose3d_batchnorm_center_fp32": (
        ("batch_norm",), (("row", "mean over the last 3 dim(s) of 16x32x31x63x63"),)),
    "conv_transpose3d_layernorm_gelu_scale_fp32": (
        (), (("row", "layer_norm over the last dim"),)),
    "conv_transpose2d_min_sum_gelu_bias_bf16": (
        ("channel",), (("strided", "sum over dims [2]"),)),
}
#: conv_tasks/rec_chain_*: the same for our small cases (refused before conv_then: a branch
#: after a tail, a matrix product of the conv's output, a pooling with padding).
CONV_TASK_CHAINS = {
    "rec_chain_branching_tails": (("max_pool",), (("row", "mean over the last 2 dim"),
                                                  ("row", "mean over the last 2 dim"),
                                                  ("pointwise", "add"))),
    "rec_chain_conv_matmul": ((), (("gemm", "384x12"),)),
    "rec_chain_pool_padding": ((), (("pool", "padding (1, 1)"),)),
    "rec_chain_pixel_operand": ((), (("pointwise", "broadcast to the result"),)),
    "rec_chain_spatial_softmax": ((), (("strided", "logsumexp over dims [2]"),)),
}
#: conv_tasks/rec_pre_*: a convolution reading a computed value (chains.before_conv): name ->
#: (family, algo or None, description words) of each kernel, in order.
CONV_TASK_BEFORE = {
    "rec_pre_relu_conv_fp32": (("pointwise", None, "relu"), ("conv", "implicit_gemm", "conv2d")),
    "rec_pre_two_convs_fp32": (("conv", "implicit_gemm", "-> 16 channels"),
                               ("conv", "implicit_gemm", "-> 16 channels")),
    "rec_pre_depthwise_pointwise_bf16": (("conv", "direct", "-> 32 channels, kernel 3x3"),
                                         ("conv", "implicit_gemm", "-> 64 channels, kernel 1x1")),
    "rec_pre_avgpool_transposed_fp32": (("pool", None, "avg_pool3d"),
                                        ("conv", "implicit_gemm", "transposed conv3d")),
    "rec_pre_functional_strided_fp32": (("conv", "implicit_gemm", "padding (1, 1)"),
                                        ("conv", "implicit_gemm", "stride (2, 2)")),
    "rec_pre_pool_spatial_softmax_fp32": (("pool", None, "avg_pool3d"),
                                          ("conv", "implicit_gemm", "clamp"),
                                          ("row", None, "softmax over the last 3 dims")),
}
#: Bundled tasks no family covers, and the op the message must name (none today: the
#: messages are checked on the tasks in negative/).
BUNDLED_NOT_COVERED: dict[str, str] = {}


def task_path(name: str) -> Path:
    if name.endswith(".py") and Path(name).is_file():  # a task file of one's own
        return Path(name)
    for folder in (BUNDLED, TASKS, NEGATIVE, GEMM_TASKS, REDUCE_TASKS, GEMM19_TASKS, CONV_TASKS):
        p = folder / f"{name}.py"
        if p.is_file():
            return p
    raise FileNotFoundError(name)


def covered_task_names() -> list[str]:
    """Every covered task of the first families: the bundled ones, then ours (the reductions
    of issue 19 are listed by :func:`reduce_task_names`)."""
    return sorted(BUNDLED_COVERED) + sorted(p.stem for p in TASKS.glob("*.py"))


def reduce_task_names() -> list[str]:
    """Issue 19's covered tasks: the bundled reductions and norms, then the small ones."""
    return sorted(BUNDLED_REDUCE) + sorted(p.stem for p in REDUCE_TASKS.glob("*.py"))


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
    if "strategy" not in choices:  # one way only (the pool family)
        return [("default", True)]
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
    if strategy is not None and strategy != "default":
        tun["strategy"] = strategy
    plan = plan_of(name)
    if "plan" in tun:  # another of the recognised plans (a conv's direct kernel beside its GEMM)
        plan = recognition(name).plans[int(tun.pop("plan"))]  # type: ignore[call-overload]
    return render(plan, task_path(name).read_text(), tunables=tun, fused=fused)


def task_module(name: str):
    """The task file of ``name`` imported as a module of its own (its ``Model``, sizes and
    ``get_inputs``), a fresh one each call."""
    spec = importlib.util.spec_from_file_location(f"_famtask_{uuid.uuid4().hex[:8]}",
                                                  task_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rendered_module(tmp_path: Path, name: str, **tunables):
    """The task's rendered candidate (with ``tunables`` set), imported here from a file under
    ``tmp_path``: for tests of its plain-Python host helpers (launch plans, geometry)."""
    path = tmp_path / f"cand_{uuid.uuid4().hex[:8]}.py"
    path.write_text(rendered(name, extra=tuple(tunables.items())))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launch_int(v) -> int:
    """A launch argument (a DSL Int32, or a plain int) as an int."""
    v = getattr(v, "vals", v)
    return int(getattr(v, "value", v))


class HostEmulator:
    """A rendered candidate's buffers on the CPU, for tests that emulate its kernel launches:
    the tensors it allocates (``empty``, filled with NaN, or -1 for integers) or is given (``keep``), found again
    from a CuTe pointer it built (``flat``). A subclass's ``go(fn, *launch_args)`` stands in
    for the launch, ``fn`` being ``("emulated", kernel object)``."""

    def __init__(self, cand) -> None:
        self.cand = cand
        self.at: dict = {}
        self.launches: list = []

    def keep(self, t):
        self.at[t.data_ptr()] = t
        return t

    def empty(self, *size, **kw):
        import torch

        size = size[0] if size and isinstance(size[0], (tuple, list, torch.Size)) else size
        t = torch.empty(tuple(size), **kw)
        return self.keep(t.fill_(float("nan") if t.is_floating_point() else -1))

    def flat(self, ptr):
        addr = self.cand._PTR_INFO[id(ptr)][2]
        for start, t in self.at.items():
            size = t.numel() * t.element_size()
            if start <= addr < start + max(size, 1):
                return t.reshape(-1)[(addr - start) // t.element_size():]
        raise AssertionError(f"no buffer holds address {addr:#x}")


def emulated_module(tmp_path: Path, name: str, monkeypatch, emulator: type, compiled: str,
                    **tunables):
    """(candidate module, emulator): the task's rendered candidate with its compile replaced
    by the kernel object, its launch by ``emulator(cand).go`` and its allocations by the
    emulator's, replay off and ``compiled`` (the module's compile cache) empty."""
    cand = rendered_module(tmp_path, name, **tunables)
    emu = emulator(cand)
    monkeypatch.setattr(cand, "REPLAY", False, raising=False)
    monkeypatch.setattr(cand, "_empty", emu.empty)
    monkeypatch.setattr(cand, "_compile", lambda op, *a, **k: ("emulated", op))
    monkeypatch.setattr(cand, "_go", emu.go)
    monkeypatch.setattr(cand, "_stream", lambda: None)
    monkeypatch.setattr(cand, compiled, {})
    return cand, emu


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
        specs = [{"shape": list(t.shape), "dtype": str(t.dtype)[6:]} if isinstance(t, torch.Tensor)
                 else {"value": t} for t in inputs]
        label = "x".join(str(s) for s in inputs[0].shape)
        out.append({"label": label, "init": init, "inputs": specs})
    return out



def compile_rendered(root: Path, cases: list, items: list[tuple[tuple, Any, dict]]) -> list[dict]:
    """Compile one case per item ``(key, make_code, shape)``: one candidate file per distinct
    ``key`` (written from ``make_code()``), compiled at ``shape`` (``{"init", "inputs"}``);
    ``cases`` and the results go to ``root/results.json``. Results in case order."""
    import json

    files: dict[tuple, str] = {}
    jobs = []
    for i, (key, make_code, shape) in enumerate(items):
        if key not in files:
            path = root / f"cand_{len(files)}.py"
            path.write_text(make_code())
            files[key] = str(path)
        jobs.append({"file": files[key], "init": shape["init"], "inputs": shape["inputs"],
                     "index": i})
    out = compile_jobs(jobs, root, len(items))
    (root / "results.json").write_text(json.dumps({"cases": cases, "results": out}))
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


#: The start of a child-process driver that loads a rendered candidate (``sys.argv[1]``) and
#: its task (``sys.argv[2]``) with ``load``; what follows it sets the task's sizes.
CHILD_PRELUDE = r'''
import importlib.util, json, sys
import torch
cand_path, task_path = sys.argv[1], sys.argv[2]

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

task = load("task", task_path)
'''

#: CHILD_PRELUDE, then the candidate loaded as ``cand`` at the task's first (small)
#: verification shape, with torch's current stream a stand-in (no CUDA here) and ``je`` the
#: DSL's jit_executor (whose ``run_compiled_program`` the drivers replace by a recorder).
CHILD_CAND = CHILD_PRELUDE + r'''
import types
from cutlass.base_dsl import jit_executor as je

torch.cuda.current_stream = lambda *a, **k: types.SimpleNamespace(cuda_stream=0)
for k, v in task.VERIFY_SHAPES[0].items():  # a small shape: the launch path is the same
    setattr(task, k, v)
cand = load("cand", cand_path)
'''


def run_child(driver: str, name: str, *, timeout: int = 900) -> dict:
    """Run ``driver`` (starting with :data:`CHILD_PRELUDE`) in a child process on task
    ``name``'s default rendered candidate, compiling for sm_90a; its last stdout line, JSON."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cand.py")
        with open(path, "w") as f:
            f.write(rendered(name))
        out = subprocess.run([sys.executable, "-c", driver, path, str(task_path(name))],
                             env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
