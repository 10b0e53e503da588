"""Pure pieces of the evaluator: numerics (B1–B4), verdict logic (C3–C6, C9, C16, D1),
static filters (lesson 10), and the records' round trips. No worker processes."""

from __future__ import annotations

import dataclasses
import math
import os
import time

import pytest
import torch

from cutegen.codegen.eval import framing
from cutegen.codegen.eval.activity import Identity, Op, Window, analyse
from cutegen.codegen.eval.static import check_source
from cutegen.codegen.eval.verdict import RunFacts, decide, detect_precision
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, TrialResult, Verdict
from cutegen.codegen.inputs import SPIKES, ArgSpec, generate, refill, spike_size
from cutegen.codegen.numerics import compare
from cutegen.codegen.roofline import H200_DATASHEET, roofline, speed_of_light_us

# -- numerics ------------------------------------------------------------------------------


def _refs(x: torch.Tensor, fn=torch.softmax):
    ref64 = fn(x.double(), dim=-1)
    native = fn(x, dim=-1)
    return ref64, native


def test_b1_one_wrong_element_is_wrong():
    x = torch.randn(256, 512)
    ref64, native = _refs(x)
    cand = native.clone()
    cand[7, 9] += 1.0
    c = compare([cand], [ref64], [native])
    assert not c.passed and "1 of" in c.reason


@pytest.mark.parametrize("poison", ["all_nan", "one_nan", "inf"])
def test_b2_nan_and_inf_are_wrong(poison):
    x = torch.randn(64, 128)
    ref64, native = _refs(x)
    cand = native.clone()
    if poison == "all_nan":
        cand.fill_(float("nan"))
    elif poison == "one_nan":
        cand[3, 3] = float("nan")
    else:
        cand[0, 0] = float("inf")
    c = compare([cand], [ref64], [native])
    assert not c.passed and ("NaN" in c.reason or "Inf" in c.reason)


def test_nan_where_the_reference_has_nan_passes():
    x = torch.tensor([[1.0, -1.0, 4.0]])
    ref64, native = torch.log(x.double()), torch.log(x)
    assert compare([native.clone()], [ref64], [native]).passed


def test_b3_wrong_shape_and_dtype():
    x = torch.randn(16, 32)
    ref64, native = _refs(x)
    assert "shape" in compare([native.view(-1)], [ref64], [native]).reason
    assert "dtype" in compare([native.double()], [ref64], [native]).reason
    assert "outputs" in compare([native, native], [ref64], [native]).reason


def test_b4_precision_downgrade_is_wrong_but_reordering_passes():
    x = torch.randn(512, 4096)
    w = torch.randn(4096, 256)
    ref64 = x.double() @ w.double()
    native = x @ w
    downgraded = (x.bfloat16() @ w.bfloat16()).float()
    assert not compare([downgraded], [ref64], [native]).passed
    reordered = (x.view(512, 2, 2048) * 1).flip(1).view(512, 4096) @ w.view(2, 2048, 256).flip(0).reshape(4096, 256)
    assert compare([reordered], [ref64], [native]).passed


def _one_row_linear(k: int = 8192, n: int = 512, scale: float = 1e3):
    """A Linear's one-row output (x scaled by 1e3, as the "large" inputs) in float64 and
    an 'accurate native' stand-in: the float64 result rounded to fp32 (a GEMV's tree sums
    come close to it), then the operands x and w."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, k, generator=g, dtype=torch.float64) * scale
    w = (torch.rand(k, n, generator=g, dtype=torch.float64) * 2 - 1) / math.sqrt(k)
    ref64 = x @ w
    return ref64, ref64.float(), x, w


def test_an_fp32_summation_order_passes_against_a_nearly_exact_reference():
    """At an fp32 Linear's one-row hidden shape the task's own reference (cuBLAS's GEMV) sums
    K = 8192 products at about one fp32 rounding step of the output's rms; an fp32 kernel
    summing in another order (3xTF32 tiles, or torch's own CPU GEMV) has ~3.3 steps, and
    its elements near zero miss atol 1e-4. Judged against 2x the reference's rmse it was
    wrong (found on the H100); the fallback's least bound is FP32_STEPS steps."""
    from cutegen.codegen.numerics import FP32_STEPS

    ref64, native, _, _ = _one_row_linear()
    eps = torch.finfo(torch.float32).eps
    rms = float(ref64.pow(2).mean().sqrt())
    g = torch.Generator().manual_seed(1)
    noise = torch.randn(ref64.shape, generator=g, dtype=torch.float64)
    cand = (ref64 + noise * 3.3 * eps * rms).float()
    assert not bool(((cand.double() - ref64).abs() <= 1e-4 + 1e-4 * ref64.abs()).all())
    assert compare([cand], [ref64], [native]).passed
    # twice the least bound is wrong, and says the bound it missed
    far = (ref64 + noise * 2 * FP32_STEPS * eps * rms).float()
    c = compare([far], [ref64], [native])
    assert not c.passed and "bound" in c.reason


def test_tf32_products_stay_wrong_against_a_nearly_exact_reference():
    """The least bound does not admit a precision downgrade: TF32 operands (10-bit
    mantissas) for an fp32 Linear, nor bf16."""
    ref64, native, x, w = _one_row_linear()

    def tf32(t):
        return ((t.float().view(torch.int32) + 0x1000) & -8192).view(torch.float32).double()

    assert not compare([(tf32(x) @ tf32(w)).float()], [ref64], [native]).passed
    assert not compare([(x.bfloat16().double() @ w.bfloat16().double()).float()], [ref64],
                       [native]).passed


def _mse(a, b, every=1):
    """The mean of squared errors, of every ``every``-th value only (a cheat: less to read)."""
    d = (a.double() - b.double()).reshape(-1)[::every]
    return (d * d).mean().reshape(())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("every", [2, 4])
def test_a_loss_over_part_of_its_input_fails_on_spiky_inputs(every, seed):
    """Before: the "spiky" distribution did not exist, and a loss of a quarter of its inputs
    passed fp32's 1e-4 at KernelBench's 2^30 values on randn / uniform / large inputs (the
    mean over 2^28 of them is that exact; KernelBench moved to Pareto inputs for it). Here
    at 2^22 values: the spikes leave such a kernel off by far more than the tolerance,
    while the honest mean in fp32 passes."""
    specs = [ArgSpec("tensor", (2048, 2048), "float32")] * 2
    a, b = generate(specs, seed=seed, distribution="spiky", device="cpu")
    for x in (a, b):
        big = x.abs() >= spike_size(x.numel(), "float32") / 2
        assert int(big.sum()) <= SPIKES and int(big.sum()) >= SPIKES - 1  # (two may coincide)
        assert float(x[big].abs().max()) <= spike_size(x.numel(), "float32")
        assert float(x[~big].abs().max()) < 10  # the rest is randn
    ref64 = [_mse(a, b)]
    native = [_mse(a, b).float()]
    honest = [((a - b) * (a - b)).mean()]
    assert compare(honest, ref64, native).passed
    cheat = compare([_mse(a, b, every).float()], ref64, native)
    assert not cheat.passed and cheat.max_abs_err > 100 * (1e-4 + 1e-4 * float(ref64[0]))


def test_spikes_at_one_place_write_one_value():
    """Two of a tensor's spikes can land on one place (likely in a small tensor): its value
    must not depend on which write wins (a CUDA index_put with repeated places leaves that
    unspecified, and the input check draws the inputs again and wants them bit for bit)."""
    for seed in range(200):
        (x,) = generate([ArgSpec("tensor", (3,), "float32")], seed=seed, distribution="spiky",
                        device="cpu")
        big = x.abs() >= 500
        assert bool(big.any())
        idx = torch.arange(3)[big]
        want = ((idx % 2).float() * 2 - 1) * (0.5 + (idx % 1021).float() / 2042) * 1e3
        assert torch.equal(x[big], want)


def test_uniform_inputs_are_never_zero_and_their_spikes_positive():
    """Before: "uniform" was torch.rand's [0, 1), an exact 0 once in 2^24 values, so
    KernelBench L1 98's 2^30-value ``kl_div(log(p), q)`` was Inf on every draw (and its
    comparisons passed anything that wrote Inf)."""
    import math

    spec = [ArgSpec("tensor", (1 << 20,), "float32")]
    for seed in range(3):
        (u,) = generate(spec, seed=seed, distribution="uniform", device="cpu")
        assert float(u.min()) > 0 and float(u.max()) <= 1
        (p,) = generate(spec, seed=seed, distribution="uniform_spiky", device="cpu")
        big = p > 1
        assert 1 <= int(big.sum()) <= SPIKES and float(p.min()) > 0
        assert torch.equal(p[~big], u[~big])  # the same draw, spikes set on it
        assert math.isfinite(float((p * (p.log() - u.log())).sum()))


def test_spikes_scale_with_the_tensor_and_fit_its_dtype():
    assert spike_size(10, "float32") == 1e3
    assert spike_size(2**30, "float32") == 2**22
    assert spike_size(2**40, "bfloat16") == 1e7
    assert spike_size(2**30, "float16") == 256.0  # its square fits fp16
    (x,) = generate([ArgSpec("tensor", (100, 1000), "float16")], seed=1, distribution="spiky",
                    device="cpu")
    assert x.dtype == torch.float16 and bool(torch.isfinite(x).all())
    assert 128.0 <= float(x.abs().max()) <= 256.0


def test_float64_outputs_have_no_fp32_floor():
    ref64, _, _, _ = _one_row_linear()
    eps = torch.finfo(torch.float32).eps
    rms = float(ref64.pow(2).mean().sqrt())
    cand = ref64 + eps * rms  # one fp32 step off everywhere: far past float64's 1e-7
    assert not compare([cand], [ref64], [ref64.clone()]).passed


def _chunk_cases():
    """(cand, ref64, native) triples whose findings sit in different chunks of 7 elements."""
    x = torch.randn(5, 9)
    ref64, native = _refs(x)
    wrong_late = native.clone()
    wrong_late[4, 8] += 1.0  # the last chunk only
    worst_early = native.clone()
    worst_early[0, 1] += 3e-4  # the largest error in the first chunk, smaller ones later
    worst_early[3, 3] += 2e-4
    nan_late = native.clone()
    nan_late[4, 7] = float("nan")
    ints = torch.arange(45).reshape(5, 9)
    ints_wrong = ints.clone()
    ints_wrong[4, 8] = 0
    return [(native.clone(), ref64, native), (wrong_late, ref64, native),
            (worst_early, ref64, native), (nan_late, ref64, native), (ints, ints, ints),
            (ints_wrong, ints, ints)]


@pytest.mark.parametrize("case", range(6))
def test_chunked_comparison_finds_what_the_whole_one_finds(case):
    """The comparison walks an output in chunks (streamed to the GPU from a float64
    reference in host memory): every finding and statistic is the same at any chunk size."""
    from cutegen.codegen.numerics import _compare_on

    cand, ref64, native = _chunk_cases()[case]
    whole = compare([cand], [ref64], [native])
    small = _compare_on(cand, ref64, native, "output", None, torch.device("cpu"), 7)
    assert (small.passed, small.reason) == (whole.passed, whole.reason)
    assert small.max_abs_err == pytest.approx(whole.max_abs_err)
    assert small.rmse == pytest.approx(whole.rmse)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(6))
def test_a_host_reference_is_compared_on_the_gpu_a_chunk_at_a_time(case, monkeypatch):
    """Where the float64 reference is in host memory (no room on the GPU for its pass) and
    the candidate's output on the GPU, the output is not copied to the host: the reference
    is streamed to the GPU chunk by chunk (KernelBench L1 25 on the H100: eleven host
    comparisons of 1.6 G elements held one evaluation past 15 minutes), with the same
    findings as in host memory."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from cutegen.codegen import numerics

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    monkeypatch.setattr(numerics, "STREAM_CHUNK", 7)
    cand, ref64, native = _chunk_cases()[case]
    on_host = compare([cand], [ref64], [native])
    to_host = []

    class Copies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.device.type == "cpu" and any(
                    isinstance(a, torch.Tensor) and a.is_cuda for a in args):
                to_host.append((str(func), out.numel()))
            return out

    with Copies():
        got = compare([cand.cuda()], [ref64], [native.cuda()])
    assert (got.passed, got.reason) == (on_host.passed, on_host.reason)
    assert got.max_abs_err == pytest.approx(on_host.max_abs_err)
    assert not [c for c in to_host if c[1] > 1], to_host  # scalars read back only


def test_integer_outputs_must_match_exactly():
    ref = torch.tensor([1, 2, 3])
    assert compare([ref.clone()], [ref], [ref]).passed
    assert not compare([torch.tensor([1, 2, 4])], [ref], [ref]).passed


def test_scalar_outputs():
    ref64 = torch.tensor(1.2345, dtype=torch.float64)
    native = torch.tensor(1.2345)
    assert compare([torch.tensor(1.2345)], [ref64], [native]).passed
    assert not compare([torch.tensor(1.3)], [ref64], [native]).passed


# -- verdict logic --------------------------------------------------------------------------

CUTE = "kernel_cutlass_softmax_0"
US = 1000
FLUSH = 256 * 2**20


def _call(k, t0_us, *, cute_us=100.0, foreign=(), event_skew=0.0):
    """Window and ops of one honest call at t0 (µs), optionally with foreign work."""
    t = t0_us * US + 10 * US
    ops = [Op("memset", "memset", t, t + 50 * US, nbytes=FLUSH)]
    t += 52 * US
    ops.append(Op("kernel", CUTE, t, t + int(cute_us * US)))
    t += int(cute_us * US)
    for name, us in foreign:
        ops.append(Op("kernel", name, t + US, t + US + int(us * US)))
        t += US + int(us * US)
    return Window(k, t0_us * US, t0_us * US + 5000 * US, (FLUSH,)), ops


def _facts(*, n_verify=3, runs=30, cute_us=100.0, foreign_at=None, event_skew=0.0, **kw):
    windows, ops, events = [], [], {}
    for k in range(n_verify + runs):
        w, o = _call(k, 10_000 * k, cute_us=cute_us,
                     foreign=(("at::native::softmax_kernel", 300.0),) if k == foreign_at else ())
        windows.append(w)
        ops += o
        events[k] = (o[-1].end_ns - o[1].start_ns) / 1e3 + 3.0 + event_skew
    act = analyse(ops, windows, Identity(frozenset({CUTE}), frozenset(), (), True))
    base = dict(trial_results=[(f"main/t{k}", {"passed": True}) for k in range(n_verify)],
                kernel_names=[CUTE], finished=True, benchmarked=True, activity=act,
                timed_ks=tuple(range(n_verify, n_verify + runs)), events_us=events, sol_us=10.0)
    base.update(kw)
    return RunFacts(**base)


def test_honest_run_is_correct_with_the_observer_time():
    d = decide(_facts())
    assert d.verdict == Verdict.CORRECT and d.stage == Stage.BENCHMARK
    assert len(d.samples) == 30 and d.samples[0] == pytest.approx(100.0)
    checked = [(k, {"passed": True}) for k in (5, 9, 20)]
    d = decide(_facts(timed_results=checked))
    assert d.verdict == Verdict.CORRECT
    assert "outputs of 3 warm-up and timed calls compared" in " ".join(d.details)


def test_torch_doing_the_work_in_one_call_is_a_library_call():
    d = decide(_facts(foreign_at=12))
    assert d.verdict == Verdict.LIBRARY_CALL and "call 12" in d.message


def test_the_first_call_may_set_up_but_not_later_ones():
    assert decide(_facts(foreign_at=0)).verdict == Verdict.CORRECT
    assert decide(_facts(foreign_at=1)).verdict == Verdict.LIBRARY_CALL


def test_no_cute_kernel_at_all_is_a_decoy():
    f = _facts()
    calls = {k: dataclasses.replace(c, cute_kernels=0, cute_us=0.0) for k, c in f.activity.calls.items()}
    f.activity = dataclasses.replace(f.activity, calls=calls)
    assert decide(f).verdict == Verdict.DECOY


def test_no_kernel_is_owed_where_the_result_has_no_elements():
    """A hidden batch of 1 that the task's own ``[:-1]`` cuts to no rows (KernelBench L1 92 as
    first written): the reference's result is empty, the candidate rightly launches nothing
    (before 2026-12-05 the verdict called that a decoy; found reading the code, with no GPU
    run). Anywhere else, still a decoy."""
    f = _facts()
    calls = dict(f.activity.calls)
    calls[2] = dataclasses.replace(calls[2], cute_kernels=0, cute_us=0.0)
    f.activity = dataclasses.replace(f.activity, calls=calls)
    assert decide(f).verdict == Verdict.DECOY
    f.empty_ks = frozenset({2})
    assert decide(f).verdict == Verdict.CORRECT
    f.empty_ks = frozenset({1})  # another call's shape is the empty one
    assert decide(f).verdict == Verdict.DECOY


@pytest.mark.parametrize("outputs,empty", [
    ([{"dtype": "float32", "shape": [0, 5]}], True),
    ([{"dtype": "float32", "shape": [0, 5]}, {"dtype": "int64", "shape": [3, 0]}], True),
    ([{"dtype": "float32", "shape": [0, 5]}, {"dtype": "float32", "shape": [1]}], False),
    ([{"dtype": "float32", "shape": []}], False),  # a 0-d tensor has one element
    ([{"value": True}], False),                    # a Python number is computed too
    ([], False),                                   # unknown (no GPU reference run)
])
def test_which_shapes_have_an_empty_result(outputs, empty):
    from cutegen.codegen.eval.candidate_run import _empty_result

    assert _empty_result({"label": "x", "outputs": outputs}) is empty


def test_d1_forged_event_times_are_suspicious_and_honest_ones_pass():
    assert decide(_facts(event_skew=40.0)).verdict == Verdict.CORRECT  # a launch gap
    d = decide(_facts(event_skew=-60.0))
    assert d.verdict == Verdict.SUSPICIOUS and "disagreement" in d.message
    f = _facts()
    f.events_us = {}
    assert decide(f).verdict == Verdict.SUSPICIOUS  # no event readings at all


def test_c16_faster_than_light_is_suspicious():
    d = decide(_facts(cute_us=5.0, sol_us=10.0))
    assert d.verdict == Verdict.SUSPICIOUS and "speed of light" in d.message


def test_work_outside_the_calls_and_unfinished_work_are_suspicious():
    f = _facts()
    stray = Op("kernel", CUTE, 9_000 * US, 9_100 * US)  # between call 0 and call 1
    f.activity = dataclasses.replace(f.activity, outside=(stray,))
    d = decide(f)
    assert d.verdict == Verdict.SUSPICIOUS and "outside every call" in d.message
    f = _facts()
    f.activity = dataclasses.replace(f.activity, incomplete=(stray,))
    assert "never finished" in decide(f).message


def test_observer_failures_are_suspicious_never_correct():
    assert decide(_facts(observer_error="bad MAC")).verdict == Verdict.SUSPICIOUS
    assert decide(_facts(dropped_records=3)).verdict == Verdict.SUSPICIOUS
    assert decide(_facts(activity=None)).verdict == Verdict.SUSPICIOUS
    f = _facts()
    f.activity = dataclasses.replace(f.activity, identity=Identity(
        frozenset({CUTE}), frozenset({CUTE}), (CUTE,), True))
    assert "defines the candidate's kernel" in decide(f).message


def test_ghost_call_must_fail_and_run_no_cute_kernel():
    f = _facts(ghost_k=5, ghost_result={"passed": True, "unchanged": True})
    calls = dict(f.activity.calls)
    calls[5] = dataclasses.replace(calls[5], cute_kernels=0, cute_us=0.0)
    f.activity = dataclasses.replace(f.activity, calls=calls)
    f.timed_ks = tuple(k for k in f.timed_ks if k != 5)
    assert decide(f).verdict == Verdict.DECOY
    f.ghost_result = {"passed": True, "unchanged": False}
    assert decide(f).verdict == Verdict.CORRECT
    g = _facts(ghost_k=5, ghost_result={"passed": True, "unchanged": False})
    assert decide(g).verdict == Verdict.SUSPICIOUS  # kernels ran while disabled


def test_audit_denials_and_a_closed_audit_pipe():
    d = decide(_facts(audit=["ctypes.dlopen 'libc.so.6'"]))
    assert d.verdict == Verdict.FORBIDDEN and "ctypes.dlopen" in d.message
    assert decide(_facts(audit_closed_early=True)).verdict == Verdict.SUSPICIOUS
    # a denial the sandbox could not report ended the worker (sandbox.AUDIT_LOST_EXIT)
    lost = decide(_facts(audit_lost=True))
    assert lost.verdict == Verdict.FORBIDDEN and "audit pipe" in lost.message


def test_wrong_trial_and_determinism_trial():
    bad = [("main/randn", {"passed": True}), ("main/randn/determinism", {"passed": False, "reason": "x"})]
    assert decide(_facts(trial_results=bad, determinism_label="main/randn/determinism")).verdict == Verdict.NONDETERMINISTIC
    assert decide(_facts(trial_results=[("main/randn", {"passed": False, "reason": "x"})])).verdict == Verdict.WRONG
    moved = [("main/randn", {"passed": False, "verdict": "input_modified", "reason": "forward modified input 0"})]
    assert decide(_facts(trial_results=moved)).verdict == Verdict.INPUT_MODIFIED


def test_timed_outputs_rechecked():
    d = decide(_facts(timed_results=[(29, {"passed": False, "reason": "mismatch"})]))
    assert d.verdict == Verdict.WRONG and "timed call 29" in d.message
    # the reference worker's own verdict stands (it was "wrong" whatever it said): a GPU out
    # of memory while it compared is no wrong kernel, a changed input is what it is
    for said, v in (("oom", Verdict.OOM), ("input_modified", Verdict.INPUT_MODIFIED),
                    ("aliased_output", Verdict.ALIASED_OUTPUT)):
        d = decide(_facts(timed_results=[(7, {"passed": False, "verdict": said, "reason": "x"})]))
        assert d.verdict == v and d.message.startswith(f"timed call 7 ended {said}")


def test_timeouts_and_errors():
    assert decide(RunFacts(timeout_phase="compile")).verdict == Verdict.COMPILE_TIMEOUT
    assert decide(RunFacts(timeout_phase="import")).verdict == Verdict.TIMEOUT
    assert decide(RunFacts(error={"verdict": "oom", "message": "x"})).verdict == Verdict.OOM
    assert decide(RunFacts(error={"verdict": "forbidden", "message": "x"})).verdict == Verdict.FORBIDDEN
    assert decide(RunFacts(protocol_error="bad frame")).verdict == Verdict.CRASH


def test_precision_detection():
    assert detect_precision(["wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"], "float32") == "tf32"
    assert detect_precision(["HGMMA.64x128x16.F32.BF16 R0, gdesc[UR4]"], "bfloat16") == ""
    assert detect_precision(["FFMA R1, R2, R3, R4"], "float32") == ""


# -- roofline -----------------------------------------------------------------------------


def test_roofline_and_speed_of_light():
    r = roofline(bytes_moved=int(4.3e9), flops=0)
    assert r.kind == "memory" and math.isclose(r.bound_us, 1000.0, rel_tol=1e-6)
    g = roofline(bytes_moved=3 * 8192 * 8192 * 2, flops=2 * 8192**3)
    assert g.kind == "compute"
    # outputs that fit in the L2 do not count against the cold-cache bound
    assert speed_of_light_us(input_bytes=0, output_bytes=2**20) == 0.0
    assert speed_of_light_us(input_bytes=int(4.8e9), output_bytes=0,
                             ceilings=H200_DATASHEET) == pytest.approx(1000.0)


def test_less_arithmetic_than_the_reference_is_not_faster_than_light():
    """KernelBench L1 12, ``torch.diag(A) @ B`` at N = M = 4096: the reference's FLOPs are a
    4096³ product (139 µs at the H200's datasheet peak), but a correct kernel scales B's rows
    (46.7 µs on an H100, read and write of 64 MiB each): not ``suspicious`` by C16. Its time
    is beyond the measured roofline (FLOPs at the measured GEMM rate), which an external
    profiler must confirm."""
    n = 4096
    in_b, out_b, flops = 4 * n + 4 * n * n, 4 * n * n, 2 * n**3
    sol = speed_of_light_us(input_bytes=in_b, output_bytes=out_b)
    assert sol < 46.7 < flops / (H200_DATASHEET.peak_tflops * 1e12) * 1e6
    d = decide(_facts(cute_us=46.7, sol_us=sol))
    assert d.verdict == Verdict.CORRECT
    assert roofline(bytes_moved=in_b + out_b, flops=flops).fraction(46.7) > 1.0  # to ncu


# -- static filters ------------------------------------------------------------------------


def test_static_accepts_the_positive_control(make_candidate):
    assert check_source(make_candidate("good").code).ok


@pytest.mark.parametrize("twist,needle", [
    (dict(forward="return torch.softmax(x, dim=-1)"), "torch.softmax"),
    (dict(forward="return x.softmax(-1)"), ".softmax"),
    (dict(imports="import threading"), "threading"),
    (dict(imports="import ctypes"), "ctypes"),
    (dict(forward="s = torch.cuda.Stream()\nreturn x"), "torch.cuda.Stream"),
    (dict(module_extra="torch.cuda.Event.elapsed_time = None"), "monkeypatching"),
    (dict(module_extra="class T(torch.Tensor):\n    pass"), "subclasses torch.Tensor"),
    (dict(forward="import os\nos.system('true')\nreturn x"), "os.system"),
    # import bans bypassed through `from` forms (found by the red team: neither was caught)
    (dict(imports="from torch.utils import cpp_extension"), "torch.utils.cpp_extension"),
    (dict(imports="from cuda.bindings import runtime"), "cuda.bindings.runtime"),
    (dict(imports="from cuda.bindings import nvrtc"), "cuda.bindings.nvrtc"),
    (dict(forward="m = cuda.cuModuleLoadData(b'')\nreturn x"), "cuModuleLoadData"),
    (dict(forward="k = cuda.cuLaunchKernel\nreturn x"), "cuLaunchKernel"),
    (dict(forward="f = torch.cuda._compile_kernel\nreturn x"), "_compile_kernel"),
    (dict(forward="t = cutlass.base_dsl.jit_executor.ctypes\nreturn x"), "ctypes"),
    (dict(forward="m = getattr(torch, 'ct' + 'ypes_helper')\nreturn x"), ""),
    (dict(forward="n = 'c' + 'types'\nm = __import__(n)\nreturn x"), "__import__"),
    (dict(forward="s = x.__class__.__subclasses__()\nreturn x"), "__subclasses__"),
    (dict(forward="g = run_kernel.__globals__\nreturn x"), "__globals__"),
    (dict(module_extra="P = '/proc/self/mem'"), "/proc/"),
    (dict(forward="from torch.profiler import profile\nreturn x"), "torch.profiler"),
    (dict(forward="g = torch.cuda.CUDAGraph()\nreturn x"), "CUDAGraph"),
])
def test_static_rejects(make_candidate, twist, needle):
    r = check_source(make_candidate("bad", **twist).code)
    if not needle:  # obfuscated names are beyond a filter (lesson 10): the runtime decides
        return
    assert not r.ok and r.verdict == Verdict.STATIC_REJECT
    assert any(needle in f for f in r.findings), r.findings


def test_static_rejects_missing_pieces():
    assert "ModelNew" in check_source("import cutlass\n").message
    assert "CuTe DSL" in check_source("class ModelNew:\n    pass\n").message
    assert "cute.kernel" in check_source("import cutlass\nclass ModelNew:\n    pass\n").message
    r = check_source("def f(:\n")
    assert r.verdict == Verdict.COMPILE_ERROR and "line 1" in r.message


# -- inputs, wire, tensor files, records ------------------------------------------------


def test_inputs_are_deterministic_per_seed_and_distribution():
    specs = [ArgSpec("tensor", (64, 33), "bfloat16"), ArgSpec("tensor", (64,), "int64", 0, 1000),
             ArgSpec("value", value=3)]
    a = generate(specs, seed=5, distribution="randn", device="cpu")
    b = generate(specs, seed=5, distribution="randn", device="cpu")
    c = generate(specs, seed=6, distribution="randn", device="cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2] == 3
    assert not torch.equal(a[0], c[0])
    assert int(a[1].min()) >= 0 and int(a[1].max()) < 1000
    neg = generate(specs, seed=5, distribution="negative", device="cpu")[0]
    assert bool((neg <= 0).all())
    refill(c, specs, seed=5, distribution="randn")
    assert torch.equal(c[0], a[0])


def test_wire_frames_and_corruption():
    r, w = os.pipe()
    framing.send(w, {"t": "trial", "i": 1})
    os.write(w, b"PASS\n" * 4)
    os.close(w)
    it = framing.frames(r)
    assert next(it) == {"t": "trial", "i": 1}
    with pytest.raises(framing.ProtocolError):
        next(it)
    os.close(r)


def test_overflow_of_the_output_dtype_is_an_expected_inf():
    # found on the H200: cumprod(1 + 0.01 x) over 30001 columns exceeds the fp32 range, the
    # float64 reference stays finite, and an fp32 kernel's +Inf there was called wrong
    ref64 = torch.tensor([1.0, 2.0, 1e39, -1e40], dtype=torch.float64)
    native = ref64.float()  # [1, 2, inf, -inf]
    assert compare([native.clone()], [ref64], [native]).passed
    finite = torch.tensor([1.0, 2.0, 3e38, -3e38])
    assert "Inf mismatch" in compare([finite], [ref64], [native]).reason
    early = torch.tensor([1.0, float("inf"), float("inf"), -float("inf")])
    assert "+Inf mismatch" in compare([early], [ref64], [native]).reason


def test_an_inf_the_task_s_own_dtype_reaches_too_is_no_mismatch():
    # found on the H100 (KernelBench level 1 problem 90, cumprod of randn + 3 over 32768
    # columns): the product passes fp32's largest value, then a factor near zero brings it back
    # under; the float64 reference is finite there, every fp32 scan (torch's own included)
    # has Inf from the first overflow on, and the candidate was called wrong
    x = torch.tensor([[1e20, 1e20, 1e-3, 2.0, 0.5]])
    r64 = torch.cumprod(x.double(), 1)  # 1e20, 1e40, 1e37, 2e37, 1e37
    native = torch.tensor([[1e20, float("inf"), float("inf"), float("inf"), float("inf")]])
    assert compare([native.clone()], [r64], [native]).passed
    # another association that stays in range is right too, within the tolerance
    assert compare([r64.float()], [r64], [native]).passed
    # an Inf where the task's own reference is finite is still a mismatch
    early = torch.tensor([[float("inf"), float("inf"), 1e37, 2e37, 1e37]])
    assert "+Inf mismatch" in compare([early], [r64], [native]).reason
    # and the sign must be the native's
    neg = torch.tensor([[1e20, float("inf"), -float("inf"), 2e37, 1e37]])
    assert "-Inf mismatch" in compare([neg], [r64], [native]).reason


def test_a_native_inf_gives_no_accuracy_allowance_elsewhere():
    # before: where the task's own reference was Inf and the float64 one finite, its error
    # there (Inf) made "as accurate as the task's own reference" admit any error anywhere
    r64 = torch.tensor([1.0, 2.0, 3.0, 1e37], dtype=torch.float64)
    native = torch.tensor([1.0, 2.0, 3.0, float("inf")])
    far = torch.tensor([1.5, 2.0, 3.0, 1e37])
    assert "outside atol" in compare([far], [r64], [native]).reason
    wrong_there = torch.tensor([1.0, 2.0, 3.0, 2e37])
    assert "not finite" in compare([wrong_there], [r64], [native]).reason


def test_timing_summary_and_evaluation_round_trip():
    t = Timing.from_samples([5.0, 1.0, 3.0, 2.0, 4.0])
    assert t.median_us == 3.0 and t.p10_us == pytest.approx(1.4) and t.n == 5
    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, timing=t, eager=Timing.from_samples([6.0] * 3),
                   trials=(TrialResult("main/randn", True, max_abs_err=1e-6),),
                   roofline=roofline(bytes_moved=10**9, flops=0), flags=("host_bound",))
    back = Evaluation.from_dict(e.to_dict())
    assert back == e and back.speedup_eager == 2.0
    assert back.busy_us is None and back.host_wait_fraction is None  # not known: not guessed
    assert back.eager_tf32 is None and back.speedup_eager_tf32 is None
    conv = dataclasses.replace(e, eager_tf32=Timing.from_samples([1.5] * 3))  # cuDNN in TF32, beside eager
    back = Evaluation.from_dict(conv.to_dict())
    assert back == conv and back.speedup_eager_tf32 == 0.5 and back.speedup_eager == 2.0


def test_the_gpu_busy_time_says_how_long_the_gpu_waited_on_the_host():
    # on the H200 a three-launch call's span was 225 us against 105 us of kernels: the rest
    # was Python between the launches, which no report or prompt said
    from cutegen.codegen.prompting import format_timings

    t = Timing.from_samples([225.0, 224.0, 226.0])
    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, timing=t, busy_us=105.0)
    back = Evaluation.from_dict(e.to_dict())
    assert back == e and back.host_wait_fraction == pytest.approx(1 - 105 / 225)
    assert "waited on the host" in format_timings(e) and "53%" in format_timings(e)
    busy = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                      verdict=Verdict.CORRECT, timing=t, busy_us=220.0)
    assert "waited on the host" not in format_timings(busy)
    old = {k: v for k, v in e.to_dict().items() if k != "busy_us"}  # a row from before
    assert Evaluation.from_dict(old).busy_us is None


def test_gpu_time_is_every_stage_the_evaluation_held_its_gpu():
    # the bench's "GPU-min" column read 0.0 (under 3 s) for KernelBench's matrix products,
    # whose evaluations took 35-50 s each on an H100: only the comparisons and the benchmark
    # phase were counted, not the reference worker's inputs, the calls, the compile, the
    # workers' start or the task's baselines
    stages = {"static": 0.5, "worker_start": 3.0, "setup": 1.0, "compile": 20.0,
              "inputs": 10.0, "call": 30.0, "verify": 2.0, "benchmark": 1.5}
    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, stage_seconds=stages, gpu="NVIDIA H200")
    assert e.gpu_seconds == pytest.approx(67.5)  # all but the static checks
    # the evaluator's stages overlap (the inputs and comparisons fall inside the calls'
    # phases): the wall time it measures from taking a worker to the verdict is the truth
    held = dataclasses.replace(e, stage_seconds={**stages, "baselines": 20.0, "total": 76.0})
    assert held.gpu_seconds == 76.0
    assert Evaluation.from_dict(held.to_dict()).gpu_seconds == 76.0
    cpu = dataclasses.replace(held, verdict=Verdict.COMPILED, stage=Stage.COMPILE, gpu="")
    assert cpu.gpu_seconds == 0.0  # compile-only: no GPU was held


def test_cutegen_eval_prints_the_gpu_busy_time(capsys):
    from cutegen.cli.eval import print_evaluation

    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, timing=Timing.from_samples([225.0] * 3),
                   busy_us=105.0)
    print_evaluation(e)
    out = capsys.readouterr().out
    assert "GPU busy" in out and "105.00 us of the span" in out and "53%" in out


def test_cutegen_eval_prints_eager_in_tf32_beside_eager(capsys):
    from cutegen.cli.eval import print_evaluation
    from cutegen.codegen.prompting import format_timings

    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, timing=Timing.from_samples([100.0] * 3),
                   eager=Timing.from_samples([300.0] * 3))
    print_evaluation(e)
    out = capsys.readouterr().out
    assert "3.00x" in out and "TF32" not in out  # no cuDNN op: one eager
    print_evaluation(dataclasses.replace(e, eager_tf32=Timing.from_samples([80.0] * 3)))
    out = capsys.readouterr().out
    assert "cuDNN in fp32, as the candidate" in out and "torch's default" in out
    assert "speedup vs eager, TF32" in out and "0.80x" in out and "3.00x" in out
    # and an LLM rewriter's prompt says which eager the speed-up is against
    assert "TF32" not in format_timings(e)
    text = format_timings(dataclasses.replace(e, eager_tf32=Timing.from_samples([80.0] * 3)))
    assert "PyTorch eager: 300.0" in text and "speedup 3.00x" in text
    assert "cuDNN in TF32, torch's default and less precise" in text and "0.80x" in text


def test_an_evaluation_says_which_kernels_took_the_time(capsys):
    # where a call's GPU time goes, kernel by kernel, from the observer's records: kept in the
    # Evaluation (and so in the store), printed by `cutegen eval` with the kernels' class names
    from cutegen.cli.eval import print_evaluation
    from cutegen.codegen.evaluation import KernelTime, kernel_times_text, short_kernel_name

    d = decide(_facts())
    assert d.kernel_times == ((CUTE, pytest.approx(100.0), 1, True),)
    conv = "kernel_cutlass_kernel_cutegen_candidate_0930c7c09005ConvKernel_object_at__CopyAtom"
    bn = "kernel_cutlass_kernel_cand_conv2d_bf16BatchNormKernel_object_at__ptrbf16gmem"
    times = (KernelTime(conv, 54.9, 1, True), KernelTime(bn, 30.1, 2, True),
             KernelTime("memset", 1.2, 1, False))
    assert [short_kernel_name(k.name) for k in times] == ["ConvKernel", "BatchNormKernel",
                                                          "memset"]
    assert kernel_times_text(times) == ("ConvKernel 54.90 us, BatchNormKernel 2 x 30.10 us, "
                                        "memset 1.20 us (not CuTe)")
    assert kernel_times_text(times, most=1) == "ConvKernel 54.90 us, and 2 more"
    e = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                   verdict=Verdict.CORRECT, timing=Timing.from_samples([90.0] * 3),
                   kernel_times=times, kernels=(conv, bn))
    back = Evaluation.from_dict(e.to_dict())
    assert back == e
    old = {k: v for k, v in e.to_dict().items() if k != "kernel_times"}  # a row from before
    assert Evaluation.from_dict(old).kernel_times == ()
    print_evaluation(e)
    out = capsys.readouterr().out
    assert "GPU time by kernel" in out and "BatchNormKernel 2 x 30.10 us" in out
    assert "ConvKernel, BatchNormKernel" in out  # the kernels row: names a person can read
    from cutegen.codegen.prompting import format_timings  # and an LLM rewriter's prompt

    assert "GPU time by kernel (median a call): ConvKernel 54.90 us" in format_timings(e)


def test_foreign_gpu_processes_are_those_beside_the_worker_on_its_device():
    # found on the H200: processes left behind by an earlier command shared the GPU with a
    # benchmark and slowed it silently; now such an Evaluation carries review:gpu_shared
    from cutegen.codegen.eval.evaluator import foreign_pids

    devices = {0: {10, 11, 99}, 1: {12, 13}}
    assert foreign_pids(devices, worker={10}, own={11}) == {99}
    assert foreign_pids(devices, worker={12}, own={11}) == {13}  # other devices never count
    assert foreign_pids(devices, worker={10}, own={11, 99}) == set()
    assert foreign_pids(devices, worker={77}, own=set()) is None  # cannot tell: no flag
    assert foreign_pids({}, worker={10}, own=set()) is None


def test_reference_worker_hands_back_cached_gpu_memory_above_the_threshold(monkeypatch):
    # on the H200 a softmax_long_bf16 reference worker kept ~48 GiB cached between trials,
    # beside the candidate's worker on the same GPU
    from cutegen.codegen.eval import refworker

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: 48 * 2**30)
    refworker._release_cached_memory()
    assert calls == ["empty"]
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: 2**30)
    refworker._release_cached_memory()
    assert calls == ["empty"]  # 1 GiB cached: kept for the next trial


class _Ev:
    def __init__(self, enable_timing=True):
        self.done = False


def _fake_timer(queries, sleep_cycles=100):
    """A Timer whose CUDA calls are fakes: ``queries`` says, per timed call, whether its
    start event had already fired when the call was queued."""
    from cutegen.codegen import _timing

    log = {"sleeps": [], "calls": 0}
    answers = iter(queries)
    t = _timing.Timer.__new__(_timing.Timer)
    t._sleep_cycles, t.late_calls = sleep_cycles, 0
    t._flush = torch.empty(0)
    t.originals = {"synchronize": lambda: None, "Event": _Ev,
                   "elapsed_time": lambda a, b: 0.5, "record": lambda e: None,
                   "query": lambda e: next(answers, False),
                   "sleep": log["sleeps"].append, "perf_counter": time.perf_counter}
    return t, log


def test_a_timed_call_queued_after_its_start_event_is_timed_again_with_a_longer_sleep():
    # a slow host queues the call after the GPU finished the sleep and passed the start
    # event: the gap would be timed as kernel time (suspected on the H200, where a run's
    # first evaluation, right after the baselines, measured 4-20% slower than re-timing)
    from cutegen.codegen._timing import MAX_REDO

    t, log = _fake_timer([True, True, False, False, False])
    calls = []
    samples = t.time_calls(lambda: calls.append(1), warmup=0, runs=3)
    assert samples == [500.0] * 3 and t.late_calls == 2 and len(calls) == 5
    assert log["sleeps"] == [100, 200, 400, 400, 400]  # doubled per late call, then kept
    t, log = _fake_timer([True] * 10)
    assert len(t.time_calls(lambda: None, warmup=0, runs=2)) == 2  # never more than MAX_REDO
    assert t.late_calls == 2 * MAX_REDO




def test_values_at_the_edge_of_the_dtype_range_may_overflow_either_way():
    # found on the H200: an fp16 matmul of 1e3-scaled inputs put 2 of 4M elements at the
    # overflow edge; the reference rounded them to inf, the kernel to 65504 (and back)
    r64 = torch.tensor([1.0, 65519.0, 65530.0, 1e6, -1e6], dtype=torch.float64)
    native = r64.half()
    either = torch.tensor([1.0, float("inf"), 65504.0, float("inf"), -float("inf")]).half()
    assert compare([either], [r64], [native]).passed
    finite_far_beyond = torch.tensor([1.0, 65504.0, 65504.0, 65504.0, -float("inf")]).half()
    assert "Inf mismatch" in compare([finite_far_beyond], [r64], [native]).reason


def test_a_time_beyond_the_measured_roofline_needs_an_external_profiler():
    from cutegen.codegen.eval.external import ExternalTime, per_call_us
    from cutegen.codegen.eval.verdict import above_roofline

    kw = dict(median_us=100.0, busy_us=98.0, bound_us=104.0, message="correct")
    v, msg, lines = above_roofline(ExternalTime("ncu", 99.0, 5), **kw)
    assert v == Verdict.CORRECT and "confirmed" in lines[0]
    assert above_roofline(ExternalTime("ncu", 70.0, 5), **kw)[0] == Verdict.SUSPICIOUS
    v, msg, _ = above_roofline(ExternalTime("ncu", 98.0, 5, ("ampere_sgemm",)), **kw)
    assert v == Verdict.SUSPICIOUS and "ampere_sgemm" in msg
    v, msg, _ = above_roofline(ExternalTime("ncu", error="ncu is not installed"), **kw)
    assert v == Verdict.SUSPICIOUS and "no external profiler" in msg
    assert per_call_us([("a", 1000.0), ("b", 2000.0)] * 3, 3) == [3.0, 3.0, 3.0]
    assert per_call_us([("a", 1.0)] * 5, 3) == []  # launches that do not split into calls


def test_ncu_reading_a_small_kernel_slower_is_agreement_and_faster_is_not():
    """ncu read one 13.7 µs kernel at 17.2 µs on an H100 (the 2 µs / 10 % rule failed an
    honest kernel); the allowance is per kernel and on the slow side only."""
    from cutegen.codegen.eval.external import ExternalTime
    from cutegen.codegen.eval.verdict import above_roofline, external_agrees

    assert external_agrees(17.152, 13.7275, 1)
    assert not external_agrees(17.152 + 2.0, 13.7275, 1)
    assert external_agrees(17.152 + 2.0, 13.7275, 2)  # two kernels, twice the allowance
    assert not external_agrees(10.0, 13.7275, 1)  # the observer faster than ncu: forged
    assert external_agrees(1000.0 * 1.099, 1000.0, 1) and not external_agrees(1120.0, 1000.0, 1)
    kw = dict(median_us=13.8, busy_us=13.7275, bound_us=14.0, message="correct")
    assert above_roofline(ExternalTime("ncu", 17.152, 5), **kw)[0] == Verdict.CORRECT
    assert above_roofline(ExternalTime("ncu", 30.0, 5, kernels=3), **kw)[0] == Verdict.SUSPICIOUS


def test_float_scalars_of_forward_vary_between_calls():
    # found while widening the families (issue 19): A * s with s baked in at capture (3.14)
    # passed, because every call passed the task's own s
    specs = [ArgSpec("tensor", (4,), "float32"), ArgSpec("value", value=3.14),
             ArgSpec("value", value=2), ArgSpec("value", value=True)]
    a = generate(specs, seed=11, distribution="randn", device="cpu", vary_scalars=True)
    b = generate(specs, seed=11, distribution="randn", device="cpu", vary_scalars=True)
    c = generate(specs, seed=12, distribution="randn", device="cpu", vary_scalars=True)
    assert a[1] == b[1] and a[1] != 3.14 and c[1] != a[1] and 1.57 <= a[1] < 6.28
    assert a[2] == 2 and a[3] is True  # sizes and switches stay
    assert generate(specs, seed=11, distribution="randn", device="cpu")[1] == 3.14
