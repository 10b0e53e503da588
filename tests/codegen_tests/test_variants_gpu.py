"""GPU check: bf16 variants (``--precision bf16``) of fp32 tasks of each kind are judged
through the real evaluator: the families' first candidate for each variant is correct at
bf16's tolerance, against the float64 reference of the variant's rounded inputs and
parameters, and its eager baseline is the bf16 model's.

    pytest -m gpu tests/codegen_tests/test_variants_gpu.py -q
"""

from __future__ import annotations

import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.evaluation import Verdict

#: bundled fp32 tasks of each kind: a row softmax, a norm with parameters, a Linear with an
#: epilogue (3xTF32 in fp32: the variant's bf16 tensor cores), a conv, a strided reduction
TASKS = ("softmax_fp32", "layernorm_fp32", "gemm_bias_relu_fp32", "conv2d_fp32",
         "amax_dim0_fp32")


@pytest.mark.gpu
@pytest.mark.parametrize("name", TASKS)
def test_a_bf16_variants_first_candidate_is_correct(name, tmp_path):
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_bundled_task
    from cutegen.codegen.variants import make_variant

    task = make_variant(load_bundled_task(name), "bf16", tmp_path / "variants")
    props = family_proposals(task)
    assert props, f"{task.name} not recognised"
    opts = EvalOptions(bench_runs=30, baselines=True)
    with LocalEvaluator(task, opts, run_dir=tmp_path / "run") as ev:
        e = ev.evaluate(props[0].candidate)
    assert e.verdict == Verdict.CORRECT, (e.message, e.details, e.log_tail[-3000:])
    assert e.eager and e.speedup_eager
