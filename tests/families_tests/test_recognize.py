"""Recognition: every bundled task is matched to the right family (or named as not covered),
fused prologues / epilogues are found, and uncovered tasks get a message naming the op."""


import _cutegen_famdata as fd  # registered by conftest.py
import pytest

#: Our extra tasks: name -> (family, op, prologue ops, epilogue ops, params that must hold).
EXTRA = {
    "softmax_scale_bias_bf16": ("row", "softmax", "mul, add", "-", {}),
    "layernorm_relu_fp32": ("row", "layer_norm", "-", "relu",
                            {"weight": "p_ln_weight", "bias": "p_ln_bias", "eps": 1e-5}),
    "rmsnorm_residual_bf16": ("row", "rms_norm", "add", "-", {"eps": 1.1920928955078125e-07}),
    "log_softmax_temperature_fp32": ("row", "log_softmax", "div", "-", {}),
    "mean_keepdim_bf16": ("row", "mean", "-", "mul, sub", {"keepdim": True}),
    "max_values_fp32": ("row", "amax", "-", "-", {"keepdim": False}),
    "argmax_bf16": ("row", "argmax", "-", "-", {}),
    "amin_fp32": ("row", "amin", "-", "-", {}),
    "cumsum_reverse_fp32": ("scan", "cumsum", "-", "-", {"reverse": True}),
    "cumsum_exclusive_bf16": ("scan", "cumsum", "-", "-", {"exclusive": True}),
    "cumprod_fp32": ("scan", "cumprod", "mul, add", "-", {}),
    "swish_gate_bf16": ("pointwise", "pointwise", "sigmoid, mul, mul, add", "-", {}),
    "new_gelu_fp32": ("pointwise", "pointwise", "mul, pow, mul, add, mul, tanh, add, mul", "-",
                      {}),
    "cross_entropy_sum_bf16": ("row", "cross_entropy", "-", "-",
                               {"reduction": "sum", "ignore_index": 3, "target": "targets"}),
    "layernorm_2d_bf16": ("row", "layer_norm", "-", "-", {"k": 2}),
    # softmax(x.view(b, c, -1), dim=2).view(b, c, h, w): over the last 2 dims, views identities
    "softmax_spatial_viewed_fp32": ("row", "softmax", "identity, mul", "identity, mul",
                                    {"k": 2}),
}
#: Tasks no family covers: name -> words the message must contain.
NEGATIVE = {
    "conv2d": ["nn.Conv2d", "padding_mode='reflect'"],
    "data_dependent": ["torch.fx", "control flow"],
    "sum_three_runs": ["dims [0, 2, 4]", "three or more separate runs"],
    "var_all": ["var", "one pass"],
    "logsumexp_dims02": ["logsumexp over dims [0, 2]", "one middle run"],
    "scale_shift_repeat": ["Tensor.repeat", "--seed-candidate"],
}


def test_every_extra_task_is_listed():
    assert sorted(EXTRA) == sorted(p.stem for p in fd.TASKS.glob("*.py"))
    assert sorted(NEGATIVE) == sorted(p.stem for p in fd.NEGATIVE.glob("*.py"))
    bundled = {p.stem for p in fd.BUNDLED.glob("*.py")}
    assert bundled == set(fd.BUNDLED_COVERED) | set(fd.BUNDLED_NOT_COVERED) | set(
        fd.BUNDLED_GEMM) | set(fd.BUNDLED_REDUCE) | set(fd.BUNDLED_GEMM19) | set(
        fd.BUNDLED_CONV) | set(fd.BUNDLED_LONG)


@pytest.mark.parametrize("name", sorted(fd.BUNDLED_COVERED | fd.BUNDLED_LONG))
def test_bundled_task_is_recognised(name):
    plan = fd.plan_of(name)
    assert (plan.family, plan.op) == (fd.BUNDLED_COVERED | fd.BUNDLED_LONG)[name]
    assert plan.prologue.empty and plan.epilogue.empty or plan.family == "pointwise"
    x = plan.leaf(plan.main)
    assert x.kind == "full" and x.source == "input"
    assert plan.out_dtype == ("bfloat16" if name.endswith("bf16") else "float32")


def test_bundled_details():
    ln = fd.plan_of("layernorm_bf16")
    assert ln.param("eps") == 1e-5 and ln.leaf(ln.param("weight")).kind == "col"
    assert fd.plan_of("rmsnorm_fp32").param("eps") == 1e-6
    ce = fd.plan_of("cross_entropy_bf16")
    assert (ce.param("reduction"), ce.param("ignore_index"), ce.out_shape) == ("mean", -100,
                                                                              "scalar")
    assert ce.leaf(ce.param("target")).kind == "row"
    gelu = fd.plan_of("gelu_scale_bias_fp32")
    assert [n.op for n in gelu.prologue.nodes] == ["gelu", "mul", "add"]
    kinds = {lf.name: (lf.source, lf.kind) for lf in gelu.leaves}
    assert kinds["a_scale"] == ("attr", "value")  # self.scale, read at run time
    assert kinds["p_bias"] == ("param", "col")
    assert fd.plan_of("sum_rows_bf16").out_shape == "rows"


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_fused_ops_are_found(name):
    family, op, pro, epi, params = EXTRA[name]
    plan = fd.plan_of(name)
    assert (plan.family, plan.op) == (family, op)
    assert plan.prologue.describe() == pro
    assert plan.epilogue.describe() == epi
    for k, v in params.items():
        assert plan.param(k) == v, (k, plan.params)


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_not_covered_message(name):
    rec = fd.recognition(name)
    assert not rec.covered and not rec.plans
    msg = rec.not_covered.message
    assert msg.startswith("no built-in kernel family covers this task")
    for word in NEGATIVE[name]:
        assert word in msg, msg
    assert "--rewriter llm" in msg


def test_capture_in_a_child_process_matches():
    from cutegen.codegen.families.capture import capture_in_process, capture_task

    path = fd.task_path("softmax_scale_bias_bf16")
    assert capture_task(path) == capture_in_process(path)


def test_recognize_task_reports_a_broken_task(tmp_path):
    from cutegen.codegen.families.recognize import recognize_task
    from cutegen.codegen.tasks import Task

    p = tmp_path / "broken.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                 "        return x\ndef get_inputs():\n    raise RuntimeError('boom')\n"
                 "def get_init_inputs():\n    return []\n")
    rec = recognize_task(Task("broken", p, p.read_text()), in_process=True)
    assert not rec.covered and "boom" in rec.not_covered.message


def test_a_task_the_child_cannot_capture_is_reported_by_its_own_error(tmp_path):
    """The child's failure is the message: no interpreter warning ahead of it (``-m`` on a
    module its package imports made runpy print a RuntimeWarning first, and the task's real
    error, e.g. a package it imports that is not installed, came after it)."""
    from cutegen.codegen.families.recognize import recognize_task
    from cutegen.codegen.tasks import Task

    p = tmp_path / "needs_pkg.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
                 "        super().__init__()\n        import cutegen_no_such_package\n"
                 "    def forward(self, x):\n        return x\n"
                 "def get_inputs():\n    return [torch.randn(4, 4)]\n"
                 "def get_init_inputs():\n    return []\n")
    msg = recognize_task(Task("needs_pkg", p, p.read_text())).not_covered.message
    assert "No module named 'cutegen_no_such_package'" in msg, msg
    assert "Warning" not in msg, msg


def test_a_forward_that_fails_on_meta_tensors_names_the_step(tmp_path):
    """The reason names the forward's step that failed (``self.fc (nn.Linear)``), on one
    line (torch.fx appends the traceback of the interpreted graph)."""
    from cutegen.codegen.families.recognize import recognize_task
    from cutegen.codegen.tasks import Task

    p = tmp_path / "bad_shapes.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
                 "        super().__init__()\n        self.fc = torch.nn.Linear(8, 4)\n"
                 "    def forward(self, x):\n        return torch.relu(self.fc(x))\n"
                 "def get_inputs():\n    return [torch.randn(4, 5)]\n"
                 "def get_init_inputs():\n    return []\n")
    msg = recognize_task(Task("bad_shapes", p, p.read_text()), in_process=True) \
        .not_covered.message
    assert "failed at self.fc (nn.Linear): RuntimeError" in msg, msg
    assert "While executing" not in msg, msg
