"""Issue 19's additions to the gemm family: torch.tril / triu of the product (the output tiles
they zero skip the main loop), einsum forms that are a (batched) matrix product, pointwise
ops after the row reduction (logsumexp, then Mish), and chains of family kernels (a GEMM,
then norms, pooling or reductions of what it wrote; or a norm, then the GEMM). Recognition
on every task, compile for sm_90a on the CPU (HGMMA, no local memory) on the small tasks'
main shapes, and the GPU check (``pytest -m gpu -k gemm19``)."""

import json
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

#: Small tasks: name -> (params that must hold, epilogue ops, post-reduction ops).
SMALL = {
    "tril_matmul_bf16": ({"tri": ("lower", 0), "batched": False}, "-", None),
    "triu_bmm_relu_fp32": ({"tri": ("upper", 1), "batched": True,
                            "precision_default": "3xtf32"}, "relu", None),
    "einsum_bmm_bt_bf16": ({"batched": True, "a_major": "k", "b_major": "k"}, "mul", None),
    "einsum_at_b_fp16": ({"batched": False, "a_major": "m", "b_major": "n"}, "-", None),
    "linear_lse_mish_bf16": ({"reduce": "logsumexp", "reduce_keepdim": True}, "add", "mish, mul"),
}
#: Small chain tasks: name -> each kernel's family and op.
CHAINS = {
    "chain_bn_gn_mean_fp32": [("gemm", "matmul"), ("batchnorm", "batch_norm"),
                              ("row", "group_norm"), ("row", "mean")],
    "chain_layernorm_linear_bf16": [("row", "layer_norm"), ("gemm", "matmul"),
                                    ("row", "softmax")],
    "chain_matmul_softmax_fp32": [("gemm", "matmul"), ("row", "softmax")],
    "chain_qk_softmax_fp32": [("gemm", "matmul"), ("row", "softmax")],
    "chain_mlp_fp32": [("gemm", "matmul"), ("gemm", "matmul")],
    "chain_mm_sum_dim0_fp32": [("gemm", "matmul"), ("strided", "sum")],
    "chain_mm_argmax_fp32": [("gemm", "matmul"), ("row", "argmax")],
    # the norm reads the product through two unsqueezes (KernelBench L2 28's kind, 2026-12-07)
    "chain_linear_instnorm_view_fp32": [("gemm", "matmul"), ("row", "layer_norm"),
                                        ("pointwise", "pointwise")],
    # 4-d batched products (2026-12-03, seventh session): attention's [B, H, S, D]
    "chain_sdpa_fp32": [("gemm", "matmul"), ("row", "softmax"), ("gemm", "matmul")],
    "chain_sdpa_fp16": [("gemm", "matmul"), ("row", "softmax"), ("gemm", "matmul")],
    "chain_attention_4d_bf16": [("gemm", "matmul"), ("row", "softmax"), ("gemm", "matmul")],
}
NAMES = sorted(SMALL) + sorted(CHAINS)


def _plan(name: str):
    return fd.plan_of(name)


def test_every_small_task_is_listed():
    assert sorted(NAMES) == sorted(p.stem for p in fd.GEMM19_TASKS.glob("*.py"))


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_stages(name):
    plan = _plan(name)
    assert plan.family == "chain", plan.description
    assert [(st.family, st.op) for st in plan.param("stages")] == CHAINS[name]


def test_a_tail_the_norm_cannot_fuse_is_a_kernel_of_its_own():
    """Group norm's kernel reads full and single-value operands only: the per-channel scale
    after it runs in a pointwise kernel of its own."""
    plan = _plan("gemm_gn_swish_bf16")
    assert [st.family for st in plan.param("stages")] == ["gemm", "row", "pointwise"]


def test_chain_renders_one_file_with_renamed_stages():
    code = _rendered("chain_bn_gn_mean_fp32")
    for j in range(3):
        assert f"_stage{j} = _run_stage{j}(x)" in code
    assert "_k0_epilogue" in code and "_k1_normalise" in code and "_k3_epilogue" in code
    assert code.count("class RowKernel:") == 1 and code.count("class GemmKernel:") == 1


@pytest.mark.parametrize("name", sorted(fd.BUNDLED_GEMM19))
def test_bundled_task_is_recognised(name):
    plan = _plan(name)
    assert plan.family in ("gemm", "chain") and fd.BUNDLED_GEMM19[name] in plan.description


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_task_plan(name):
    params, epi, post = SMALL[name]
    plan = _plan(name)
    assert plan.family == "gemm", plan.description
    for k, v in params.items():
        assert plan.param(k) == v, (k, plan.params)
    assert plan.epilogue.describe() == epi
    assert (plan.param("post").describe() if plan.param("post") else None) == post


def test_tril_inside_the_epilogue_is_refused(tmp_path):
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize

    p = tmp_path / "t.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n"
                 "        return torch.relu(torch.tril(a @ b)) + 1.0\n"
                 "def get_inputs():\n    return [torch.randn(64, 32), torch.randn(32, 48)]\n"
                 "def get_init_inputs():\n    return []\n")
    rec = recognize(capture_in_process(p))
    assert not rec.covered and "tril" in rec.not_covered.message


def _rendered(name: str) -> str:
    from cutegen.codegen.families.render import render

    return render(_plan(name), fd.task_path(name).read_text())


@cache
def _compiled(root: str) -> list[dict]:
    root_p = Path(root)
    root_p.mkdir(parents=True, exist_ok=True)
    jobs = []
    for i, name in enumerate(NAMES):
        path = root_p / f"{name}.py"
        path.write_text(_rendered(name))
        shape = fd.shapes(name)[0]
        jobs.append({"file": str(path), "init": shape["init"], "inputs": shape["inputs"],
                     "index": i})
    return fd.compile_jobs(jobs, root_p, len(jobs))


@pytest.mark.slow
@pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")
@pytest.mark.parametrize("index", range(len(NAMES)), ids=NAMES)
def test_compiles_on_tensor_cores_without_spills(index, tmp_path_factory):
    res = _compiled(str(tmp_path_factory.getbasetemp() / "gemm19"))[index]
    assert res["error"] is None, res["error"]
    kernels = [k for comp in res["compiles"] for k in comp["kernels"].values()]
    for k in kernels:
        assert not [op for op in k["ops"] if op.startswith(("LDL", "STL"))], json.dumps(k)
        assert k.get("frame", 0) == 0
    assert any(op.startswith("HGMMA") for k in kernels for op in k["mma"])


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(fd.BUNDLED_GEMM19) + NAMES,
                         ids=[f"gemm19-{n}" for n in sorted(fd.BUNDLED_GEMM19) + NAMES])
def test_gemm19_candidate_is_correct(name):
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.evaluation import Verdict
    from cutegen.codegen.tasks import load_task_file

    out = fd.ROOT / "runs" / "families_gpu"
    out.mkdir(parents=True, exist_ok=True)
    code = _rendered(name)
    (out / f"gemm19-{name}.py").write_text(code)
    task = load_task_file(fd.task_path(name), name=name)
    with LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=True),
                        run_dir=out / "run") as ev:
        e = ev.evaluate(CandidateSource(code, origin=f"family:gemm19-{name}"))
    t = e.timing.median_us if e.timing else None
    print(f"CASE gemm19-{name}: {e.verdict.value} {t} us, eager "
          f"{e.eager.median_us if e.eager else '-'} us, compile "
          f"{e.compiled.median_us if e.compiled else '-'} us")
    assert e.verdict == Verdict.CORRECT, f"{e.verdict.value}: {e.message}\n" + "\n".join(
        d[:2000] for d in e.details[:3])


def test_products_of_4d_operands_fold_their_batch_dims(tmp_path):
    """[B, H, S, D] @ [B, H, D, S]: one batched product over B * H (before: "the gemm family
    covers 2-d, batched 3-d and [.., K] @ [K, N] products"); the rendered forward folds the
    batch dims and hands the kernel a 3-d view of the output. Batch dims that broadcast stay
    refused, with the reason."""
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize
    from cutegen.codegen.families.render import render

    stage = _plan("chain_attention_4d_bf16").param("stages")[0]
    assert stage.param("batched") and "batch 2x4 x 128x64" in stage.description
    code = fd.rendered("chain_attention_4d_bf16")
    assert "a = a.reshape(-1, a.shape[-2], a.shape[-1])" in code
    assert "mshape = (*lead, M, N)" in code and "out.view(L, M, N)" in code
    path = tmp_path / "bcast.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, a, b):\n        return torch.matmul(a, b)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(2, 4, 8, 16), "
                    "torch.randn(1, 4, 16, 8)]\n\n\ndef get_init_inputs():\n    return []\n")
    rec = recognize(capture_in_process(path))
    assert not rec.covered and "batch dims broadcast" in rec.not_covered.message
    sdpa = _plan("chain_sdpa_fp32").param("stages")[0]
    assert sdpa.epilogue.describe() == "mul"  # the 1 / sqrt(64) scale, fused
    assert render(_plan("chain_sdpa_fp32"), fd.task_path("chain_sdpa_fp32").read_text())


@pytest.mark.parametrize("name", ["chain_sdpa_fp16", "chain_attention_4d_bf16"])
def test_attention_scores_stay_fp32_in_half_precision(name):
    """SDPA in fp16 / bf16 (KernelBench L1 97): the first product writes fp32 scores (an fp16
    score of 1e3-scaled inputs is inf, a rounded one moves its probability), the softmax reads
    them and writes probabilities in the inputs' dtype for the second product. A spelled-out
    attention (``softmax(q @ k^T) @ v``) keeps the reference's own roundings."""
    first, soft, second = _plan(name).param("stages")
    half = second.out_dtype
    assert half in ("float16", "bfloat16")
    sdpa = name.startswith("chain_sdpa")
    assert first.out_dtype == ("float32" if sdpa else half)
    assert soft.leaf("_stage0").dtype == first.out_dtype and soft.out_dtype == half
    assert first.leaf(first.param("a")).dtype == half


def test_sdpa_half_precision_stages_hold_the_tolerance_emulated():
    """The chain's roundings, emulated with torch on the CPU (each stage computed in fp32 and
    stored in the dtype its plan writes), against the evaluator's comparison on every input
    distribution: the fp32 scores hold the fp16 tolerance; scores stored in fp16 (the plan
    before) turn the 1e3-scaled inputs into inf and NaN, as the H200 saw on KernelBench L1 97."""
    import torch
    import torch.nn.functional as F

    from cutegen.codegen.inputs import DISTRIBUTIONS, ArgSpec, generate
    from cutegen.codegen.numerics import compare

    first, soft, _ = _plan("chain_sdpa_fp16").param("stages")
    specs = [ArgSpec("tensor", (1, 2, 96, 128), "float16")] * 3

    def chain(q, k, v, score_dtype):
        s = (q.float() @ k.float().transpose(-2, -1) * 128 ** -0.5).to(score_dtype)
        p = torch.softmax(s.float(), dim=-1).to(getattr(torch, soft.out_dtype))
        return (p.float() @ v.float()).half()

    failed = []
    for dist in DISTRIBUTIONS:
        q, k, v = generate(specs, seed=7, distribution=dist, device="cpu")
        ref64 = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
        native = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).half()
        ok = compare([chain(q, k, v, getattr(torch, first.out_dtype))], [ref64], [native])
        assert ok.passed, (dist, ok.reason)
        old = compare([chain(q, k, v, torch.float16)], [ref64], [native])
        failed += [] if old.passed else [dist]
    assert "large" in failed
