"""Rendered candidates keep the contract: one standalone file (no cutegen import, no
``from __future__``), TUNABLES / TUNABLE_CHOICES literals that every allowed value can be set
in, a FAMILY literal, ModelNew with Model's constructor, and the static filter accepts them."""

import ast

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.candidate import parse_tunables, set_tunable
from cutegen.codegen.eval.static import check_source
from cutegen.codegen.families.moves import read_family
from cutegen.codegen.families.template import TemplateError, apply_directives, substitute

#: Every task's default and unfused variants; every strategy of one task per family (the
#: strategies of a task differ only in the TUNABLES literal).
_ALL_STRATEGIES = ("softmax_scale_bias_bf16", "cumsum_reverse_fp32", "swish_gate_bf16",
                   "sum_dim0_keepdim_bf16", "l2norm_dim1_3d_fp32", "batch_norm_1d_fp32")
CASES = [(n, s, f) for n in fd.covered_task_names() + fd.reduce_task_names()
         for i, (s, f) in enumerate(fd.variants(n)) if i == 0 or not f or n in _ALL_STRATEGIES]


@pytest.mark.parametrize(("name", "strategy", "fused"), CASES,
                         ids=[f"{n}-{s}-{'fused' if f else 'unfused'}" for n, s, f in CASES])
def test_rendered_candidate_keeps_the_contract(name, strategy, fused):
    code = fd.rendered(name, strategy, fused)
    st = check_source(code)
    assert st.ok, st.findings or st.message
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module != "__future__" and not (node.module or "").startswith("cutegen")
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("cutegen") for a in node.names)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes and "_TaskModule" in classes
    fam = read_family(code)
    plan = fd.plan_of(name)
    assert fam == {"family": plan.family, "op": plan.op, "fused": fused}
    forward = next(f for f in classes["ModelNew"].body if isinstance(f, ast.FunctionDef))
    assert [a.arg for a in forward.args.args[1:]] == list(plan.forward_args)
    tunables = parse_tunables(code)
    assert tunables["strategy"].value == strategy if "strategy" in tunables else (
        strategy == "default")
    for t in tunables.values():  # a GEMM's knob of one choice (bf16's promote) stays put
        assert t.value in t.choices and (t.movable or len(t.choices) == 1)
    # a row pass and a pointwise pass (a chain: whatever its stages have)
    two_kernel_kinds = plan.family in ("batchnorm", "reduce_map")
    if plan.family != "chain":
        assert (any(k.startswith("pw_") for k in tunables)) == (
            (not fused and plan.family != "pointwise") or two_kernel_kinds)


@pytest.mark.parametrize("name", ["softmax_bf16", "layernorm_relu_fp32", "cumsum_fp32",
                                  "gelu_scale_bias_bf16"])
def test_every_allowed_value_can_be_set(name):
    variants = fd.variants(name)
    code = fd.rendered(name, *variants[-1])  # the unfused variant where there is one
    for t in parse_tunables(code).values():
        for value in t.choices:
            assert parse_tunables(set_tunable(code, t.name, value))[t.name].value == value


def test_rendering_is_deterministic():
    assert fd.rendered("layernorm_bf16") == fd.rendered.__wrapped__("layernorm_bf16")


def test_task_constructor_is_copied_without_forward():
    code = fd.rendered("softmax_scale_bias_bf16")
    tree = ast.parse(code)
    tm = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_TaskModule")
    assert [f.name for f in tm.body if isinstance(f, ast.FunctionDef)] == ["__init__"]
    assert "DTYPE = torch.bfloat16" in code and "VERIFY_SHAPES" not in code
    assert "float(self.scale)" in code  # the module attribute is read at run time


def test_task_module_that_needs_a_helper_is_refused():
    from cutegen.codegen.families.taskmodule import TaskModuleError, extract

    src = ("import torch\nclass Helper(torch.nn.Module):\n    pass\n"
           "class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.h = Helper()\n    def forward(self, x):\n        return x\n")
    with pytest.raises(TaskModuleError, match="Helper"):
        extract(src)


def test_task_module_keeps_constants_bound_together_or_annotated():
    """Module constants the constructor uses, however the task binds them (a tuple of names,
    an annotation): a depthwise-separable task bound ``batch, channels, ... = 4, 32, ...`` and
    its candidate failed to build (NameError: channels)."""
    from cutegen.codegen.families.taskmodule import extract

    src = ("import torch\nbatch, channels, width = 4, 32, 9\nscale: float = 0.5\n"
           "a = b = 3\nc, (d, e) = 1, (2, 3)\n"
           "class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.conv = torch.nn.Conv1d(channels, channels * 2, 3)\n"
           "        self.s = scale\n    def forward(self, x):\n        return x\n")
    tm = extract(src)
    assert tm.constants.splitlines() == ["channels = 32", "scale = 0.5"]
    ns: dict = {}
    exec(tm.imports + "\n" + tm.constants + "\n" + tm.class_source, ns)
    assert ns["_TaskModule"]().conv.out_channels == 64


def test_template_directives():
    text = "a\n#% if X > 1\nb {{V}}\n#% elif X == 1\nc\n#% else\nd\n#% endif\ne\n"
    assert apply_directives(text, {"X": 2}) == "a\nb {{V}}\ne\n"
    assert apply_directives(text, {"X": 1}) == "a\nc\ne\n"
    assert apply_directives(text, {"X": 0}) == "a\nd\ne\n"
    assert substitute("b {{V}}", {"V": "1"}) == "b 1"
    with pytest.raises(TemplateError, match="V"):
        substitute("b {{V}}", {})
    with pytest.raises(TemplateError, match="unclosed"):
        apply_directives("#% if 1\n", {})
