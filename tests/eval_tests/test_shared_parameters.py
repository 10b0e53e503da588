"""One copy of a parameter that a task's shapes share. The reference worker builds the model
once per verification shape, in fp32 and in float64; KernelBench L2 59 (a 32768 x 32768 fp32
Linear) kept six copies of its weight (37.1 GiB) beside the candidate worker's 44.8 GiB, more
than an 80 GB H100's 79.6 GiB (it ran out of memory there; 2026-12-05). Shapes whose models hold the same values now share
the tensors (and one parameters file), while the modules stay their own objects."""

import pytest
import torch
from torch import nn

from cutegen.codegen.eval.refworker import share_equal_tensors


def _model(seed: int, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.Linear(width, 4))


def test_equal_models_share_every_tensor_and_keep_their_modules():
    a, b = _model(0), _model(0)
    b.size_from_a_global = 127  # what __init__ derived from a hidden shape's globals
    assert share_equal_tensors(b, a)
    assert b[0].weight is a[0].weight and b[2].bias is a[2].bias
    assert b[1].running_mean is a[1].running_mean
    assert b is not a and b[0] is not a[0]
    assert not hasattr(a, "size_from_a_global")
    x = torch.randn(5, 8)
    a.eval(), b.eval()
    assert torch.equal(a(x), b(x))


def test_different_values_are_not_shared_and_the_states_differ():
    a, b = _model(0), _model(1)
    assert not share_equal_tensors(b, a)
    assert b[0].weight is not a[0].weight
    assert not torch.equal(b[0].weight, a[0].weight)
    # the BatchNorm's initial statistics are equal in both: those alone are shared
    assert b[1].running_var is a[1].running_var


def test_bits_decide_not_equality():
    a, b = _model(0), _model(0)
    with torch.no_grad():
        a[2].bias[0] = 0.0
        b[2].bias[0] = -0.0  # equal under ==, a different value to 1 / x
    assert not share_equal_tensors(b, a)
    assert b[2].bias is not a[2].bias
    nan_a, nan_b = _model(0), _model(0)
    with torch.no_grad():
        nan_a[0].weight[0, 0] = float("nan")
        nan_b[0].weight[0, 0] = float("nan")
    assert share_equal_tensors(nan_b, nan_a), "the same NaN bits are the same value"


@pytest.mark.parametrize("change", ["dtype", "shape", "extra", "missing"])
def test_a_different_structure_is_never_all_shared(change):
    a, b = _model(0), _model(0)
    if change == "dtype":
        b = b.double()
    elif change == "shape":
        b = _model(0, width=9)
    elif change == "extra":
        b.register_buffer("step", torch.zeros(()))
    else:
        a.register_buffer("step", torch.zeros(()))
    assert not share_equal_tensors(b, a)


def test_tied_parameters_stay_tied():
    def tied(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        m = nn.Sequential(nn.Linear(6, 6, bias=False), nn.Linear(6, 6, bias=False))
        m[1].weight = m[0].weight
        return m

    a, b = tied(3), tied(3)
    assert share_equal_tensors(b, a)
    assert b[0].weight is b[1].weight is a[0].weight


def test_the_candidate_worker_loads_each_parameters_file_once(monkeypatch, tmp_path):
    from cutegen.codegen.eval import worker

    loads: list[str] = []

    def fake_load(path, **kw):
        loads.append(str(path))
        return {"w": torch.zeros(2)}

    monkeypatch.setattr(torch, "load", fake_load)
    main, other = str(tmp_path / "state_0.pt"), str(tmp_path / "state_2.pt")
    shapes = [{"label": lab, "state_path": p, "inputs": [{"value": 3}]}
              for lab, p in (("main", main), ("batch_size=1", main), ("batch_size=127", other))]
    job = worker._GpuJob(None, {"shapes": shapes}, None, None)
    job.map_inputs()
    assert loads == [main, other]
    assert job.states[0] is job.states[1] and job.states[2] is not job.states[0]
    assert job.inputs == {0: [3], 1: [3], 2: [3]}
