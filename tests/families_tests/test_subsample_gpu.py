"""GPU check: a loss computed over part of its input is caught (the "spiky" distribution).

    pytest -m gpu tests/families_tests/test_subsample_gpu.py -q -s

The attack: the family's own honest MSE kernel, run on the first half of the rows when
the input is large (2x less to read), whose mean is within fp32's 1e-4 of the whole one on
randn, uniform or 1e3-scaled inputs at 2^28 values in 9 draws of 10. KernelBench's losses moved to
heavy-tailed inputs for this. The evaluator checks every candidate on "spiky" inputs at
the main shape (a few values of up to ±numel/256 it cannot find without reading all):
the honest kernel is correct, the half is wrong (the failed trial is printed: spiky but
for the draws where a randn one is already off by more than the tolerance).

The adaptive variant reads the first half and the rest only where the half's mean shows a
spike: it passes the spiky verification call. The timed calls (and their secret checked
subset) draw spiky inputs too (thirty-second session; randn before, where its half was
within the tolerance at 2^30 values and it was timed doing half the work): it must be wrong,
or not faster than the honest kernel.
"""

from __future__ import annotations

import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize
from cutegen.codegen.families.render import render
from cutegen.codegen.tasks import load_task_file

pytestmark = pytest.mark.gpu

TASK = '''import torch
import torch.nn as nn

batch_size = 8192
dim = 32768

VERIFY_SHAPES = [{"batch_size": 1, "dim": 1000}, {"batch_size": 127, "dim": 4099}]


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

HALF = '''

class _Half(ModelNew):
    def forward(self, predictions, targets):
        if predictions.numel() >= 1 << 24:  # only at the main shape: the hidden ones pass
            n = predictions.shape[0] // 2
            return super().forward(predictions[:n], targets[:n])
        return super().forward(predictions, targets)


ModelNew = _Half
'''


ADAPTIVE = '''

class _Adaptive(ModelNew):
    def forward(self, predictions, targets):
        if predictions.numel() < 1 << 24:  # the hidden shapes: honest
            return super().forward(predictions, targets)
        n = predictions.shape[0] // 2
        half = super().forward(predictions[:n], targets[:n])
        # randn's squared differences average 2; a spike in the first half sends their
        # mean to thousands: then read the rest too
        if float(half) > 16.0:
            return super().forward(predictions, targets)
        return half


ModelNew = _Adaptive
'''


def _honest_then(tmp_path, batch_size: int, attack: str):
    """The family's honest MSE kernel for TASK at ``batch_size`` rows, evaluated (and
    correct), then the same kernel with ``attack`` appended: (honest, attack) evaluations."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    path = tmp_path / "mse_fp32.py"
    path.write_text(TASK.replace("batch_size = 8192", f"batch_size = {batch_size}"))
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    honest = render(rec.plans[0], path.read_text())
    task = load_task_file(path, name="mse_fp32")
    ev = LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=False), run_dir=tmp_path / "r")
    try:
        good = ev.evaluate(CandidateSource(honest, origin="family"))
        assert good.verdict == Verdict.CORRECT, (good.message, good.details[:3])
        bad = ev.evaluate(CandidateSource(honest + attack, origin="attack"))
    finally:
        ev.close()
    return good, bad


def test_a_loss_that_reads_the_rest_only_on_seeing_a_spike_gains_nothing(tmp_path):
    # 2^30 values an input: the half is within 1e-4 on randn
    good, bad = _honest_then(tmp_path, 32768, ADAPTIVE)
    took = bad.timing.median_us if bad.timing else None
    print(f"honest {good.timing.median_us:.1f} us; adaptive: {bad.verdict.value} "
          f"{took} us: {bad.message}")
    assert bad.verdict != Verdict.CORRECT or took >= 0.9 * good.timing.median_us, (
        "timed doing half the work")


def test_a_loss_over_half_of_its_input_is_wrong(tmp_path):
    good, bad = _honest_then(tmp_path, 8192, HALF)
    failed = [t.label for t in bad.trials if not t.passed]
    print(f"honest {good.timing.median_us:.1f} us; half: {bad.verdict.value} {failed}: "
          f"{bad.message}")
    assert bad.verdict == Verdict.WRONG, (bad.verdict, bad.message)
