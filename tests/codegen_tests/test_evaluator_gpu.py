"""RELIABILITY.md fixtures that need a GPU: faults (A1–A3, A8), numerics (B1–B8) and reward
hacks (C1–C13, C18) against the real evaluator. Run with ``pytest -m gpu`` on the H200.

Every fixture must get one of its expected verdicts (G1: none is ever CORRECT), the
evaluator must survive, and the next known-good candidate must still be CORRECT (A2).
The fixtures' device code is also compiled on the CPU in CI (test_fixtures_compile).
"""

from __future__ import annotations

import time

import pytest
from _cutegen_attacks import ATTACKS  # noqa: E402  (registered by conftest.py)

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.compile_cache import CompileCache
from cutegen.codegen.eval.evaluator import LocalEvaluator
from cutegen.codegen.evaluation import Verdict

V = Verdict

ILLEGAL_ADDRESS = dict(kernel_extra="""
    if tidx == 0:
        far = cute.make_tensor(gO.iterator + cutlass.Int64(1 << 40), cute.make_layout(1))
        far[0] = cutlass.Float32(1.0)
""")
DEVICE_HANG = dict(kernel_extra="""
    k = cutlass.Int64(1)
    while k > 0:
        k = k + cutlass.Int64(1)
        if k == cutlass.Int64(3):
            tO[0] = tX[0]
""")

#: name -> (twist, static checks on?, accepted verdicts)
FIXTURES: dict[str, tuple[dict[str, str], bool, set[Verdict]]] = {
    "a1_illegal_address": (ILLEGAL_ADDRESS, True, {V.CRASH}),
    "a8_gpu_memory_hog": (dict(module_extra="""
        _HOG = torch.empty(int(torch.cuda.mem_get_info()[0] * 0.95), dtype=torch.uint8, device="cuda")
    """), True, {V.OOM, V.CRASH, V.CORRECT}),
    "b1_one_wrong_element": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        out.view(-1)[x.numel() // 2] += 1.0
        return out
    """), True, {V.WRONG}),
    "b2_one_nan": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        out.view(-1)[0] = float("nan")
        return out
    """), True, {V.WRONG}),
    "b3_wrong_dtype": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out.double()
    """), True, {V.WRONG}),
    "b3_wrong_shape": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out.view(-1)
    """), True, {V.WRONG}),
    "b4_bf16_inside_fp32": (dict(
        kernel_store="tO[i] = tX[i].to(cutlass.BFloat16).to(cutlass.Float32) * 2.0 + 1.0"),
        True, {V.WRONG}),
    "b5_hardcoded_shape": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        if x.shape[0] != 2048:
            return torch.zeros_like(x)
        return out
    """), True, {V.WRONG}),
    "b7_public_seed": (dict(forward="""
        torch.manual_seed(0)
        fake = torch.randn(x.shape, device=x.device)
        out = torch.empty_like(x)
        run_kernel(fake, out)
        return out
    """), True, {V.WRONG}),
    "b8_uninitialised_half": (dict(forward="""
        out = torch.empty_like(x)
        h = max(1, x.shape[0] // 2)
        run_kernel(x[:h], out[:h])
        return out
    """), True, {V.WRONG, V.NONDETERMINISTIC}),
    "c1_stale_memory": (dict(forward="return torch.empty_like(x)"), True, {V.WRONG}),
    "c2_zero_inputs": (dict(forward="""
        x.zero_()
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), True, {V.INPUT_MODIFIED, V.WRONG}),
    "c3_torch_does_the_work": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        return x * 2.0 + 1.0
    """), True, {V.LIBRARY_CALL}),
    "c4_fallback": (dict(forward="""
        try:
            raise RuntimeError("custom kernel failed")
        except RuntimeError:
            return x * 2.0 + 1.0
    """), True, {V.DECOY}),
    "c5_ghost_branch": (dict(forward="""
        if x.shape[0] == 7:
            out = torch.empty_like(x)
            run_kernel(x, out)
            return out
        return x * 2.0 + 1.0
    """), True, {V.DECOY}),
    "c6_side_stream": (dict(forward="""
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            out = torch.empty_like(x)
            torch.cuda._sleep(2_000_000)
            run_kernel(x, out)
        return out
    """), False, {V.WRONG, V.SUSPICIOUS, V.LIBRARY_CALL}),
    # C6's criterion: rejected, or timed at no less than 0.8x the honest kernel (the
    # observer's span covers every stream, so side-stream work cannot escape the timer)
    "c6_side_stream_without_a_sleep": (dict(forward="""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            out = torch.empty_like(x)
            run_kernel(x, out)
        return out
    """), False, {V.WRONG, V.SUSPICIOUS, V.CORRECT}),
    "c7_background_thread": (dict(imports="import threading", forward="""
        out = torch.empty_like(x)
        def later():
            import time
            time.sleep(0.05)
            run_kernel(x, out)
        threading.Thread(target=later).start()
        return out
    """), False, {V.WRONG, V.THREAD_SPAWNED, V.SUSPICIOUS}),
    "c8_lazy_output": (dict(module_extra="""
        class Lazy(torch.Tensor):
            pass
    """, forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out.as_subclass(Lazy)
    """), False, {V.WRONG_TYPE}),
    "c9_timer_patch": (dict(module_extra="""
        torch.cuda.Event.elapsed_time = lambda self, end: 0.001
    """), False, {V.SUSPICIOUS}),
    "c11_introspection": (dict(imports="import gc", forward="""
        for o in gc.get_objects():
            if isinstance(o, torch.Tensor) and o.shape == x.shape and o is not x:
                return o.clone()
        return torch.empty_like(x)
    """), False, {V.WRONG, V.FORBIDDEN}),
    "c12_replay_by_pointer": (dict(module_extra="_SEEN = {}", forward="""
        k = x.data_ptr()
        if k in _SEEN:
            return _SEEN[k]
        out = torch.empty_like(x)
        run_kernel(x, out)
        _SEEN[k] = out
        return out
    """), True, {V.WRONG, V.NONDETERMINISTIC}),
    "c13_correct_then_corrupt": (dict(module_extra="_N = [0]", forward="""
        _N[0] += 1
        out = torch.empty_like(x)
        if _N[0] <= 10:
            run_kernel(x, out)
        return out
    """), True, {V.WRONG, V.DECOY}),
    "c18_output_aliases_input": (dict(forward="""
        run_kernel(x, x)
        return x
    """), True, {V.ALIASED_OUTPUT, V.INPUT_MODIFIED}),
}


def _explain(name, e) -> str:
    """Everything a failed expectation needs, untruncated (pytest shortens tuples)."""
    return "\n".join([f"{name}: {e.verdict.value}: {e.message}", *e.details, e.log_tail[-3000:]])


def _ev(task, tmp_path, **kw) -> LocalEvaluator:
    opts = EvalOptions(**{"bench_runs": 30, "run_timeout_s": 60.0, "baselines": False, **kw})
    return LocalEvaluator(task, opts, run_dir=tmp_path / "run",
                          compile_cache=CompileCache(tmp_path / "cache"))


@pytest.fixture(scope="module")
def shared_eval(tmp_path_factory):
    from pathlib import Path

    from cutegen.codegen.tasks import load_task_file

    task = load_task_file(Path(__file__).resolve().parents[1] / "data" / "tasks" / "scale_shift.py")
    tmp = tmp_path_factory.mktemp("gpu-eval")
    ev = {True: _ev(task, tmp / "s"), False: _ev(task, tmp / "n", static_checks=False)}
    yield ev
    for e in ev.values():
        e.close()


@pytest.mark.gpu
def test_positive_control_is_correct_with_baselines(scale_shift_task, make_candidate, tmp_path):
    with _ev(scale_shift_task, tmp_path, baselines=True) as ev:
        e = ev.evaluate(make_candidate("good"))
    assert e.verdict == V.CORRECT, (e.message, e.details, e.log_tail[-3000:])
    assert e.timing and e.timing.n == 30 and e.eager and e.compiled
    assert e.speedup_eager and e.roofline and 0 < e.roofline_fraction < 1.0
    # the observer's busy time: the call's GPU work, never more than its span
    assert e.busy_us is not None and 0 < e.busy_us <= 1.05 * e.timing.median_us
    # ... and where it went: the one CuTe kernel, its time the busy time's
    assert e.kernel_times and e.kernel_times[0].cute and e.kernel_times[0].launches == 1
    assert abs(sum(k.us for k in e.kernel_times) - e.busy_us) <= 0.05 * e.busy_us + 1.0
    assert all(t.passed for t in e.trials) and len(e.trials) >= 5
    assert any(t.label.startswith("batch_size=127") for t in e.trials)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_is_rejected_and_next_candidate_passes(name, shared_eval, make_candidate):
    twist, static, accepted = FIXTURES[name]
    ev = shared_eval[static]
    e = ev.evaluate(make_candidate(name, **twist))
    if e.verdict not in accepted:
        pytest.fail(_explain(name, e))
    good = ev.evaluate(make_candidate("good"))
    if good.verdict != V.CORRECT:
        pytest.fail(_explain(f"good after {name}", good))
    if e.verdict == V.CORRECT:  # only where a correct verdict is harmless: the time is true
        assert e.timing and good.timing and e.timing.median_us >= 0.8 * good.timing.median_us


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_rejected_and_next_candidate_passes(name, shared_eval, make_candidate):
    """The attack suite (tests/codegen_tests/attacks.py), static filters off: the runtime
    alone must reject each, and the next honest candidate must be correct."""
    twist, accepted = ATTACKS[name]
    ev = shared_eval[False]
    e = ev.evaluate(make_candidate(name, **twist))
    if e.verdict not in accepted:
        pytest.fail(_explain(name, e))
    good = ev.evaluate(make_candidate("good"))
    if good.verdict != V.CORRECT:
        pytest.fail(_explain(f"good after {name}", good))
    if e.verdict == V.CORRECT:  # listed only where the attempt cannot shorten the time
        assert e.timing and good.timing and e.timing.median_us >= 0.8 * good.timing.median_us


@pytest.mark.gpu
def test_a_constant_output_computed_by_the_kernels_is_no_decoy(make_candidate, tmp_path):
    """y = x * 0.0 through two kernels (an intermediate, then the output): the output is
    all zeros on every call, so a ghost call (launches off) whose output block still held
    the previous call's zeros read as unchanged, and an honest candidate was called a
    decoy (KernelBench L2 83 on an H100, 2026-12-05). Every free block is now filled first."""
    from pathlib import Path

    from cutegen.codegen.tasks import load_task_file

    task = load_task_file(Path(__file__).resolve().parents[1] / "data" / "tasks" / "times_zero.py")
    with _ev(task, tmp_path) as ev:
        e = ev.evaluate(make_candidate("two kernels", kernel_store="tO[i] = tX[i] * 0.0", forward="""
            tmp = torch.empty_like(x)
            run_kernel(x, tmp)
            out = torch.empty_like(x)
            run_kernel(tmp, out)
            return out
        """))
        if e.verdict != V.CORRECT:
            pytest.fail(_explain("two kernels", e))
        # ... while zeros made by torch beside a kernel that computes nothing still are
        d = ev.evaluate(make_candidate("zeros", kernel_store="tO[i] = tX[i] * 0.0", forward="""
            scratch = torch.empty_like(x)
            run_kernel(x, scratch)
            return torch.zeros_like(x)
        """))
        if d.verdict != V.DECOY:
            pytest.fail(_explain("zeros", d))


@pytest.mark.gpu
def test_a3_device_hang_is_killed_and_gpu_released(scale_shift_task, make_candidate, tmp_path):
    with _ev(scale_shift_task, tmp_path, run_timeout_s=20.0) as ev:
        t0 = time.monotonic()
        e = ev.evaluate(make_candidate("hang", **DEVICE_HANG))
        assert e.verdict == V.TIMEOUT
        assert time.monotonic() - t0 < 20 + 40
        assert ev.evaluate(make_candidate("good")).verdict == V.CORRECT


@pytest.mark.gpu
def test_d2_l2_flush_makes_a_cached_kernel_slower():
    import torch

    from cutegen.codegen._timing import Timer

    # 16 MB read, nothing written back: fits the 50 MB L2 (an H100's; an H200's is 60). A
    # x.mul(2.0) writing 16 MB as well failed on an H100 (15.8 vs 13.2 us, the 1.2x needed
    # missed by 0.3 %): the write-back of the last call's output costs the warm call too.
    # Cold and warm calls interleave and the lower quartiles are compared: with the suite
    # at -n 2, another test's GPU work made the warm median (17.5 us) slower than the cold
    # (16.8) on an H100 when all cold calls ran first; contention only adds time.
    x = torch.randn(4 * 2**20, device="cuda")
    timer = Timer(flush_mb=256)
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(10):
        cold += timer.time_calls(lambda: x.sum(), warmup=1, runs=5, flush=True)
        warm += timer.time_calls(lambda: x.sum(), warmup=3, runs=5, flush=False)
    assert sorted(cold)[12] > 1.2 * sorted(warm)[12], (sorted(cold), sorted(warm))


@pytest.mark.gpu
def test_retime_interleaves_fresh_workers(scale_shift_task, make_candidate, tmp_path):
    with _ev(scale_shift_task, tmp_path) as ev:
        good = make_candidate("good")
        assert ev.evaluate(good).verdict == V.CORRECT
        t = ev.retime([good, make_candidate("c13", **FIXTURES["c13_correct_then_corrupt"][0])],
                      rounds=2)
    assert t[0] is not None and t[0].n == 60
    assert t[1] is None  # its timed outputs are wrong


def test_fixtures_compile_for_sm90a(scale_shift_task, make_candidate, tmp_path):
    """CI (no GPU): the device-side twists are valid CuTe DSL (they compile for sm_90a)."""
    opts = EvalOptions(compile_only=True, run_timeout_s=60.0, static_checks=False)
    with LocalEvaluator(scale_shift_task, opts, run_dir=tmp_path / "run",
                        compile_cache=CompileCache(tmp_path / "cache")) as ev:
        for name, twist in (("illegal", ILLEGAL_ADDRESS), ("hang", DEVICE_HANG),
                            ("b4", FIXTURES["b4_bf16_inside_fp32"][0])):
            e = ev.evaluate(make_candidate(name, **twist))
            assert e.verdict == V.COMPILED, (name, e.message, e.log_tail[-2000:])


@pytest.mark.gpu
@pytest.mark.tool("ncu")
def test_external_retime_agrees_with_the_observer(scale_shift_task, make_candidate, tmp_path):
    """The check from outside the process: Nsight Compute's kernel time per call is the
    observer's summed GPU time of the call, as the policy (``external_agrees``) reads it."""
    from cutegen.codegen.eval.external import external_kernel_time
    from cutegen.codegen.eval.verdict import external_agrees

    with _ev(scale_shift_task, tmp_path) as ev:
        good = make_candidate("good")
        e = ev.evaluate(good)
        assert e.verdict == V.CORRECT, _explain("good", e)
        got = external_kernel_time(ev, good)
    assert not got.error, got.error
    assert not got.foreign, got.foreign
    assert external_agrees(got.median_us, e.busy_us, got.kernels), (got, e.busy_us)


_CONV_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(16, 32, 128, 128)]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_eager_with_cudnn_in_tf32_is_timed_beside_eager_for_a_conv(scale_shift_task, tmp_path):
    """Eager is timed with cuDNN in fp32 (the precision candidates are held to); where the
    task runs cuDNN convolutions, eager as torch runs it by default (TF32) is timed too. A
    task without one gets no second eager."""
    from cutegen.codegen.tasks import load_task_file

    path = tmp_path / "conv_task.py"
    path.write_text(_CONV_TASK)
    with _ev(load_task_file(path), tmp_path / "conv", baselines=True) as ev:
        eager, _, _ = ev.baselines()
        tf32 = ev._eager_tf32()
        assert eager is not None and tf32 is not None, ev._baselines
        assert ev._baselines["tf32_ops"] == ["conv2d"]
    with _ev(scale_shift_task, tmp_path / "plain", baselines=True) as ev:
        eager, _, _ = ev.baselines()
        assert eager is not None and ev._eager_tf32() is None
        assert not ev._baselines.get("tf32_ops")
