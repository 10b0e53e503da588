"""Precision variants of a task (``cutegen.codegen.variants``, ``--precision bf16``): what the
variant's file does when run, where it is written, and the suites built of them."""

from __future__ import annotations

import importlib.util
import uuid

import pytest

from cutegen.codegen.suites import Suite, SuiteTask, kernelbench_suite, with_precision
from cutegen.codegen.tasks import load_task_file
from cutegen.codegen.variants import PRECISIONS, make_variant, variant_source
from cutegen.errors import TaskError

torch = pytest.importorskip("torch")

#: A KernelBench-style task: parameters, a buffer, an integer input, a scalar init argument,
#: and the ``super(Model, self).__init__()`` spelling (a subclass rebinding ``Model``
#: recursed there).
TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, scale):
        super(Model, self).__init__()
        self.fc = nn.Linear(features, 3)
        self.norm = nn.BatchNorm1d(3)
        self.scale = scale

    def forward(self, x, idx):
        return self.norm(self.fc(x)).index_select(1, idx) * self.scale


def get_inputs():
    return [torch.randn(4, 5), torch.tensor([2, 0])]


def get_init_inputs():
    return [5, 0.5]
'''


def _run(path):
    spec = importlib.util.spec_from_file_location(f"_variant_{uuid.uuid4().hex[:8]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_variant_casts_floating_inputs_and_parameters_only(tmp_path):
    (tmp_path / "t.py").write_text(TASK)
    v = make_variant(load_task_file(tmp_path / "t.py"), "bf16", tmp_path / "variants")
    mod = _run(v.path)
    x, idx = mod.get_inputs()
    assert x.dtype == torch.bfloat16 and idx.dtype == torch.int64  # the index stays
    model = mod.Model(*mod.get_init_inputs())
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.norm.running_mean.dtype == torch.bfloat16
    assert model.norm.num_batches_tracked.dtype == torch.int64  # an integer buffer stays
    assert model.scale == 0.5 and type(model) is mod.Model  # the class keeps its identity
    assert model(x, idx).dtype == torch.bfloat16
    # the original text is kept whole, the variant's lines after it
    assert v.source.startswith(TASK) and "bf16 variant" in v.source


def test_nested_and_non_tensor_inputs_pass_through(tmp_path):
    (tmp_path / "n.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b, c):\n"
        "        return a\ndef get_inputs():\n"
        "    return [(torch.ones(2), torch.ones(2, dtype=torch.bool)), 3.0, [torch.ones(1)]]\n"
        "def get_init_inputs():\n    return []\n")
    v = make_variant(load_task_file(tmp_path / "n.py"), "bf16", tmp_path)
    (a, mask), three, (c,) = _run(v.path).get_inputs()
    assert (a.dtype, mask.dtype, three, c.dtype) == (torch.bfloat16, torch.bool, 3.0,
                                                     torch.bfloat16)


def test_the_variant_file_is_stable_and_named_after_the_task(tmp_path):
    (tmp_path / "t.py").write_text(TASK)
    task = load_task_file(tmp_path / "t.py", name="kb_L1_P9_Toy")
    a = make_variant(task, "bf16", tmp_path / "v")
    mtime = a.path.stat().st_mtime_ns
    b = make_variant(task, "bf16", tmp_path / "v")
    assert a.path == b.path and a.sha256 == b.sha256 and a.path.stat().st_mtime_ns == mtime
    assert a.name == "kb_L1_P9_Toy_bf16" and a.path.parent.name == task.sha256[:12]
    assert a.sha256 != task.sha256  # a run of the variant is a run of its own
    assert make_variant(task, "native", tmp_path / "v") is task
    # a file someone changed there is written again with the variant's text
    a.path.write_text("garbage")
    assert make_variant(task, "bf16", tmp_path / "v").source == a.source
    assert a.path.read_text() == a.source
    assert PRECISIONS == ("native", "bf16")


def test_an_unknown_precision_is_refused(tmp_path):
    (tmp_path / "t.py").write_text(TASK)
    with pytest.raises(TaskError, match="unknown precision 'fp8'"):
        make_variant(load_task_file(tmp_path / "t.py"), "fp8", tmp_path)
    with pytest.raises(TaskError, match="unknown precision"):
        variant_source(TASK, "native")


def test_an_unwritable_folder_is_a_task_error(tmp_path):
    (tmp_path / "t.py").write_text(TASK)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(TaskError, match="cannot write the bf16 variant"):
        make_variant(load_task_file(tmp_path / "t.py"), "bf16", tmp_path / "file")


def test_a_suite_in_bf16(tmp_path, kb_two):
    kb = kernelbench_suite(kb_two(TASK, "4, 5"), 1)
    assert with_precision(kb, "native", tmp_path / "v") is kb
    s = with_precision(kb, "bf16", tmp_path / "v")
    assert s.name == "kernelbench-L1-bf16" and "bf16 variants" in s.description
    toy, already = s.tasks
    assert already == kb.tasks[1]  # already bf16: kept as it is
    assert (toy.dtype, toy.tier, toy.kernelbench) == ("bf16", "KernelBench L1", None)
    assert toy.label == "kb_L1_P3_Toy_bf16" and toy.task.endswith("kb_L1_P3_Toy_bf16.py")
    assert load_task_file(toy.task).source == variant_source(TASK, "bf16")
    # an entry with seed candidates: the variant keeps them
    (tmp_path / "mine_fp32.py").write_text(TASK)
    own = Suite("own", "d", (SuiteTask(str(tmp_path / "mine_fp32.py"), "fp32", "t",
                                       seed_candidates=("seed.py",)),))
    (t,) = with_precision(own, "bf16", tmp_path / "v").tasks
    assert t.seed_candidates == ("seed.py",) and t.label == "mine_fp32_bf16" and t.dtype == "bf16"


def test_a_variant_is_recognised_as_a_bf16_task(tmp_path):
    """The families see the variant's dtypes: a softmax's variant renders a bf16 kernel."""
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_bundled_task

    native = family_proposals(load_bundled_task("softmax_fp32"))[0].candidate.code
    props = family_proposals(make_variant(load_bundled_task("softmax_fp32"), "bf16", tmp_path))
    assert props, "the bf16 variant of softmax_fp32 was not recognised"
    assert "out = _empty(shape, dtype=torch.float32" in native
    assert "out = _empty(shape, dtype=torch.bfloat16" in props[0].candidate.code


def test_a_variants_candidate_builds_its_parameters_in_bf16(tmp_path):
    """The families copy Model's constructor into the candidate; for a variant the copy casts
    too, since the harness loads the reference's bf16 parameters into ModelNew's own in
    their dtype (without it, the bf16 GEMM candidate of an fp32 Linear's variant held fp32
    weights and its kernel read them as bf16)."""
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.families.taskmodule import extract
    from cutegen.codegen.tasks import load_bundled_task
    from cutegen.codegen.variants import init_cast, variant_dtype

    native = load_bundled_task("gemm_bias_relu_fp32")
    v = make_variant(native, "bf16", tmp_path / "v")
    assert variant_dtype(v.source) == "bfloat16" and variant_dtype(native.source) is None
    assert init_cast("_TaskModule", "bfloat16") in extract(v.source).class_source
    assert "_cutegen_task_init" not in extract(native.source).class_source
    for task, want in ((native, torch.float32), (v, torch.bfloat16)):
        path = tmp_path / f"cand_{want}.py".replace("torch.", "")
        path.write_text(family_proposals(task)[0].candidate.code)
        mod = _run(path)
        model = mod.ModelNew(*_run(task.path).get_init_inputs())
        assert {p.dtype for p in model.parameters()} == {want}


def test_an_llm_asked_for_a_variants_kernel_is_told_to_build_bf16_parameters(tmp_path):
    """The prompts carry the task's text, so the variant's own lines say what its candidates
    must do: build their parameters in bf16 (the harness keeps ModelNew's dtypes)."""
    from cutegen.codegen.prompting import focus_hints, initial_prompt

    (tmp_path / "t.py").write_text(TASK)
    v = make_variant(load_task_file(tmp_path / "t.py"), "bf16", tmp_path / "v")
    user = initial_prompt(v, focus=focus_hints("initial")[0]).user
    assert TASK.splitlines()[5] in user  # the original text
    assert "ModelNew must build its parameters in torch.bfloat16" in user


def test_cutegen_eval_checks_a_candidate_against_the_variant(tmp_path, eval_sees):
    """``cutegen eval TASK CAND --precision bf16`` evaluates against the bf16 variant, written
    under RUN_DIR/variants/ (the evaluator replaced: what it is given is checked)."""
    from click.testing import CliRunner

    from cutegen.cli.eval import eval_cmd

    seen = eval_sees
    (tmp_path / "t.py").write_text(TASK)
    (tmp_path / "cand.py").write_text("x = 1\n")
    r = CliRunner().invoke(eval_cmd, [str(tmp_path / "t.py"), str(tmp_path / "cand.py"),
                                      "--precision", "bf16", "--compile-only", "--run-dir",
                                      str(tmp_path / "run")])
    assert len(seen) == 1, r.output
    (task,) = seen
    assert task.name == "t_bf16" and task.source == variant_source(TASK, "bf16")
    assert task.path.parent.parent == tmp_path / "run" / "variants"
