"""Hand-built GEMM plans (what recognition produces for matmul tasks) and their task files,
shared by the GEMM compile and GPU tests and the GEMM benchmark.

``PLANS`` maps a name to ``(plan, task file)``; ``rendered(name, **tunables)`` is the
candidate source. Task files live in ``benchmarks/tasks`` (bundled) and ``gemm_tasks/``.
"""

from pathlib import Path

from cutegen.codegen.families.gemm import render_gemm
from cutegen.codegen.families.plan import Chain, Leaf, Plan, PwNode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUNDLED = ROOT / "benchmarks" / "tasks"
TASKS = HERE / "gemm_tasks"


def _plan(a: Leaf, b: Leaf, *, a_major="k", b_major="n", batched=False, epilogue=None,
          extra=(), reduce="", keepdim=False, precision="bf16", out_dtype="bfloat16",
          forward_args=("A", "B"), description="") -> Plan:
    params = (("a", a.name), ("b", b.name), ("a_major", a_major), ("b_major", b_major),
              ("batched", batched), ("reduce", reduce), ("reduce_keepdim", keepdim),
              ("precision_default", precision))
    return Plan(family="gemm", op="matmul", leaves=(a, b, *extra), main=a.name,
                prologue=Chain((), f"@{a.name}"), epilogue=epilogue or Chain((), "%y"),
                params=params, out_dtype=out_dtype,
                out_shape="rows" if reduce else "matrix", forward_args=forward_args,
                description=description or f"matmul {a_major}/{b_major}")


def _in(name: str, dtype: str, kind: str = "full") -> Leaf:
    return Leaf(name, "input", name, kind, dtype)


def _linear(dtype: str, precision: str, epilogue_ops: tuple, description: str) -> Plan:
    x = Leaf("x", "input", "x", "full", dtype)
    w = Leaf("weight", "param", "linear.weight", "full", dtype)
    bias = Leaf("bias", "param", "linear.bias", "col", dtype)
    nodes = [PwNode(0, "add", ("%y", "@bias"))]
    for i, op in enumerate(epilogue_ops, 1):
        params = (("approximate", "none"),) if op == "gelu" else ()
        nodes.append(PwNode(i, op, (f"%{i - 1}",), params))
    return _plan(x, w, b_major="k", epilogue=Chain(tuple(nodes), f"%{len(nodes) - 1}"),
                 extra=(bias,), precision=precision, out_dtype=dtype, forward_args=("x",),
                 description=description)


def _build() -> dict:
    bf = "bfloat16"
    p: dict = {}
    p["gemm_bf16"] = (_plan(_in("A", bf), _in("B", bf), description="A @ B bf16"),
                      BUNDLED / "gemm_bf16.py")
    p["gemm_fp32"] = (_plan(_in("A", "float32"), _in("B", "float32"), precision="3xtf32",
                            out_dtype="float32", description="A @ B fp32 (3xtf32)"),
                      BUNDLED / "gemm_fp32.py")
    p["gemm_skinny_bf16"] = (_plan(_in("A", bf), _in("B", bf), description="A @ B bf16, M = 128"),
                             BUNDLED / "gemm_skinny_bf16.py")
    p["linear_mish_mish_fp32"] = (_linear("float32", "3xtf32", ("mish", "mish"),
                                          "mish(mish(x @ W^T + b)) fp32"),
                                  BUNDLED / "linear_mish_mish_fp32.py")
    p["gemm_bias_relu_bf16"] = (_linear(bf, "bf16", ("relu",), "relu(x @ W^T + b) bf16"),
                                BUNDLED / "gemm_bias_relu_bf16.py")
    p["gemm_bias_relu_fp32"] = (_linear("float32", "3xtf32", ("relu",),
                                        "relu(x @ W^T + b) fp32"),
                                BUNDLED / "gemm_bias_relu_fp32.py")
    p["linear_gelu_bf16"] = (_linear(bf, "bf16", ("gelu",), "gelu(x @ W^T + b) bf16"),
                             TASKS / "linear_gelu_bf16.py")
    p["linear_bf16"] = (_plan(_in("A", bf), _in("B", bf), b_major="k",
                              description="A @ B^T bf16 (B stored N x K)"),
                        TASKS / "matmul_bt_bf16.py")
    p["matmul_at_bf16"] = (_plan(_in("A", bf), _in("B", bf), a_major="m",
                                 description="A^T @ B bf16 (A stored K x M)"),
                           TASKS / "matmul_at_bf16.py")
    p["bmm_bf16"] = (_plan(_in("A", bf), _in("B", bf), batched=True, description="bmm bf16"),
                     TASKS / "bmm_bf16.py")
    p["matmul_fp16"] = (_plan(_in("A", "float16"), _in("B", "float16"), precision="fp16",
                              out_dtype="float16", description="A @ B fp16"),
                        TASKS / "matmul_fp16.py")
    p["matmul_tf32"] = (_plan(_in("A", "float32"), _in("B", "float32"), precision="tf32",
                              out_dtype="float32", description="A @ B fp32 (tf32 allowed)"),
                        TASKS / "matmul_tf32.py")
    scale = Leaf("scale", "attr", "scale", "value")
    res = Leaf("R", "input", "R", "full", bf)
    epi = Chain((PwNode(0, "mul", ("%y", "@scale")), PwNode(1, "add", ("%0", "@R"))), "%1")
    p["matmul_scale_residual_bf16"] = (
        _plan(_in("A", bf), _in("B", bf), epilogue=epi, extra=(scale, res),
              forward_args=("A", "B", "R"), description="A @ B * scale + R bf16"),
        TASKS / "matmul_scale_residual_bf16.py")
    p["matmul_logsumexp_bf16"] = (
        _plan(_in("A", bf), _in("B", bf), reduce="logsumexp", keepdim=True, description="logsumexp(A @ B, dim=1, keepdim) bf16"),
        TASKS / "matmul_logsumexp_bf16.py")
    return p


PLANS = _build()


def plan(name: str) -> Plan:
    return PLANS[name][0]


def task_path(name: str) -> Path:
    return PLANS[name][1]


def rendered(name: str, **tunables) -> str:
    p, path = PLANS[name]
    return render_gemm(p, path.read_text(), tunables=tunables or None)


def shapes(name: str | Path) -> list[dict]:
    """The task's (a plan name or a task file) main shape and its VERIFY_SHAPES as compile
    cases ``{"label", "init", "inputs": [{"shape", "dtype"}]}`` (sizes from the task's
    globals, tensors on meta)."""
    import importlib.util
    import uuid

    import torch

    path = name if isinstance(name, Path) else task_path(name)
    spec = importlib.util.spec_from_file_location(f"_gemmtask_{uuid.uuid4().hex[:8]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main = {k: v for k, v in vars(module).items()
            if isinstance(v, int) and not isinstance(v, bool) and not k.startswith("_")}
    out = []
    for ov in [{}] + list(getattr(module, "VERIFY_SHAPES", [])):
        for k, v in dict(main, **ov).items():
            setattr(module, k, v)
        with torch.device("meta"):
            inputs = module.get_inputs()
        specs = [{"shape": list(t.shape), "dtype": str(t.dtype)[6:]} for t in inputs]
        out.append({"label": "x".join(str(s) for s in inputs[0].shape) + (
            "" if not ov else "-" + "-".join(f"{k}{v}" for k, v in ov.items())),
            "init": list(module.get_init_inputs()), "inputs": specs})
    return out


def gemm_knobs_of(name: str) -> tuple[dict, dict]:
    """(default TUNABLES, TUNABLE_CHOICES) of the plan's candidate."""
    from cutegen.codegen.families.gemm import gemm_knobs

    return gemm_knobs(plan(name))
