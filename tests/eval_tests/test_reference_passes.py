"""The reference worker's two passes over one call's inputs (``Reference.references``): the
native one (the task's own dtype) and the float64 one candidates are judged against.

- The float64 inputs are taken before the native call. A forward that changes its input in
  place (``x.mul_(2)``) gave the float64 pass the changed input before, so its reference was
  4x where the task computes 2x and a correct candidate was ``wrong``.
- The two passes never hold each other's inputs: the native inputs are let go before the
  float64 pass, and since the twenty-third session the float64 pass runs first and its inputs
  are let go before the native call. No copy of the shared input buffers is kept either: the
  check that a candidate left them alone draws them again from the seed. Each was 6 GiB of
  KernelBench L1 23's 4096 x 393216 fp32 softmax, which an 80 GB H100 could not hold (the
  reference worker peaked at 48 GiB there beside the candidate's 19 to 31 GiB).

Run on the CPU here: the same code runs on the GPU with ``device="cuda"``.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cutegen.codegen.eval import refworker
from cutegen.codegen.eval.refworker import FP32_REFERENCE, Reference
from cutegen.codegen.inputs import ArgSpec, generate, generate_float64, refill

TASK = '''import torch
import torch.nn as nn

CHECK = None


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n))

    def forward(self, x):
        if CHECK is not None:
            CHECK(x)
        BODY
        return x * self.scale


def get_inputs():
    return [torch.randn(6, 5)]


def get_init_inputs():
    return [5]
'''


def _reference(tmp_path: Path, body: str = "pass", dists: str = "") -> Reference:
    task = tmp_path / "task.py"
    task.write_text(TASK.replace("BODY", body) + (f"\nINPUT_DISTRIBUTIONS = {dists}\n"
                                                 if dists else ""))
    ref = Reference(str(task), gpu=False, scratch=tmp_path)
    ref.load(hidden=False, seed_init=0)
    ref.models[0] = ref.mod.Model(*ref.shapes[0]["init_args"])  # on the CPU, not the meta device
    return ref


def _inputs(ref: Reference, seed: int) -> list:
    specs = [ArgSpec.from_dict(s) for s in ref.shapes[0]["specs"]]
    return generate(specs, seed=seed, distribution="randn", device="cpu")


def test_a_forward_changing_its_input_in_place_has_the_right_float64_reference(tmp_path):
    ref = _reference(tmp_path, "x.mul_(2)")
    ref64, native = ref.references(0, seed=7, dist="randn")
    (x,) = _inputs(ref, 7)
    assert torch.equal(native[0], 2 * x)
    assert ref64[0].dtype == torch.float64
    assert torch.allclose(ref64[0], 2 * x.double())


def test_the_native_inputs_are_let_go_before_the_float64_pass(tmp_path, monkeypatch):
    ref = _reference(tmp_path)
    made: list = []
    real = refworker.generate

    def spy(*a, **kw):
        out = real(*a, **kw)
        made.extend(weakref.ref(t) for t in out if isinstance(t, torch.Tensor))
        return out

    monkeypatch.setattr(refworker, "generate", spy)
    alive_at_float64: list[bool] = []
    ref.mod.CHECK = lambda x: alive_at_float64.append(
        any(r() is not None for r in made)) if x.dtype == torch.float64 else None
    ref64, native = ref.references(0, seed=3, dist="randn")
    assert alive_at_float64 == [False]
    assert torch.allclose(ref64[0], native[0].double())


def test_an_op_without_float64_falls_back_to_fresh_float32_inputs(tmp_path):
    ref = _reference(tmp_path, "x.mul_(2)\n        if x.dtype == torch.float64:\n"
                               "            raise RuntimeError('no float64 kernel')")
    ref64, native = ref.references(0, seed=11, dist="randn")
    (x,) = _inputs(ref, 11)
    assert ref64[0].dtype == torch.float32
    assert torch.equal(native[0], 2 * x) and torch.equal(ref64[0], 2 * x)


def _live(dtype: torch.dtype, shape: torch.Size) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects()
               if isinstance(o, torch.Tensor) and o.dtype == dtype and o.shape == shape)


def test_no_float64_input_is_alive_during_the_native_call(tmp_path):
    # the forward reduces, so the float64 output (kept for the comparison) has another shape
    ref = _reference(tmp_path, "x = x.sum(dim=0)")
    float64_inputs_at_native: list[int] = []
    ref.mod.CHECK = lambda x: float64_inputs_at_native.append(
        _live(torch.float64, x.shape)) if x.dtype == torch.float32 else None
    ref64, native = ref.references(0, seed=5, dist="randn")
    assert float64_inputs_at_native == [0]
    assert torch.allclose(ref64[0], native[0].double())


def test_the_input_check_draws_the_inputs_again_and_keeps_no_copy(tmp_path):
    ref = _reference(tmp_path)
    (x,) = _inputs(ref, 0)
    ref.buffers[0] = [torch.empty_like(x)]  # on the GPU, the dedicated shared allocation
    ref.prepare(0, seed=9, dist="randn")
    (want,) = _inputs(ref, 9)
    assert torch.equal(ref.buffers[0][0], want)
    del want
    assert _live(torch.float32, x.shape) == 2  # the buffer and x: no copy of the inputs
    assert ref._inputs_intact(0) == ""
    ref.buffers[0][0][2, 3] += 1.0  # what a candidate writing into its input does
    assert ref._inputs_intact(0) == "forward modified input 0 in place"
    ref.prepare(0, seed=10, dist="randn")
    assert ref._inputs_intact(0) == ""


def test_an_input_check_before_any_inputs_is_refused(tmp_path):
    ref = _reference(tmp_path)
    assert ref._inputs_intact(0) == "no inputs were prepared for this call"


GiB = 2**30
SOFTMAX = {  # KernelBench L1 23's shape: 4096 x 393216 fp32 in and out, 6 GiB each
    "specs": [{"kind": "tensor", "shape": [4096, 393216], "dtype": "float32"}],
    "outputs": [{"dtype": "float32", "shape": [4096, 393216]}], "output_bytes": 6 * GiB}


def test_a_comparison_s_peak_is_the_float64_pass():
    assert refworker.comparison_bytes(SOFTMAX) == 24 * GiB
    bf16 = {"specs": [{"kind": "tensor", "shape": [1024, 1024], "dtype": "bfloat16"},
                      {"kind": "tensor", "shape": [1024], "dtype": "int64"},
                      {"kind": "value", "value": 0.5}],
            "outputs": [{"dtype": "bfloat16", "shape": [1024, 1024]}, {"value": True}]}
    # float64 inputs (8 MiB + the int64 tensor as it is) and the float64 output (8 MiB)
    assert refworker.comparison_bytes(bf16) == 16 * 2**20 + 8 * 1024


def test_kept_copies_leave_room_for_the_comparison_and_the_candidate():
    # an H100 with the softmax's input buffer allocated: 72 GiB free. A quarter of it held
    # two copies: beside the comparison's 24 GiB and the candidate's 31 the GPU ran out
    assert refworker.keep_slots(72 * GiB, [SOFTMAX]) == 1
    assert refworker.keep_slots(130 * GiB, [SOFTMAX]) == 5  # an H200
    assert refworker.keep_slots(8 * GiB, [SOFTMAX]) == 0  # its checks compared at once
    small = dict(SOFTMAX, output_bytes=64 * 2**20, specs=[
        {"kind": "tensor", "shape": [4096, 4096], "dtype": "float32"}],
        outputs=[{"dtype": "float32", "shape": [4096, 4096]}])
    assert refworker.keep_slots(72 * GiB, [small]) == 72 * GiB // 4 // (64 * 2**20)


def test_a_kept_comparison_out_of_memory_is_an_oom_verdict(tmp_path, monkeypatch):
    ref = _reference(tmp_path)
    ref.slots[0] = [torch.zeros(6, 5)]

    def no_memory(*a, **kw):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(ref, "compare_tensors", no_memory)
    r = ref.compare_kept(slot=0, shape=0, seed=1, dist="randn")
    assert r["verdict"] == "oom" and not r["passed"] and 0 not in ref.slots


def test_the_reference_workers_oom_says_how_memory_stood():
    """An ``oom`` from the reference worker named no sizes (KernelBench level 1's 7.5 GB
    InstanceNorm on an 80 GB H100): it now says what the worker held, what was free, and the
    way on."""
    from cutegen.codegen.eval.refworker import oom_reason

    gib = 2 ** 30
    text = oom_reason(61 * gib, int(2.5 * gib), 80 * gib)
    assert "held 61.0 GiB" in text and "2.5 of 80.0 GiB were free" in text
    assert "more memory" in text


def _oom_once(ref: Reference, seen: list) -> None:
    """The first float64 forward runs out of GPU memory (as KernelBench L1 45's 17 GB input
    did on an 80 GB H100); every forward notes its input's dtype and device."""
    def check(x):
        seen.append((x.dtype, x.device.type))
        if x.dtype == torch.float64 and sum(d == torch.float64 for d, _ in seen) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 32.00 GiB")
    ref.mod.CHECK = check


def test_a_float64_pass_without_room_on_the_gpu_runs_in_host_memory(tmp_path, monkeypatch):
    # before: the out-of-memory error was taken for "an op without float64 support" and the
    # task's own fp32 arithmetic became the reference, silently
    ref = _reference(tmp_path, "x.mul_(2)")
    ref.gpu = True  # a GPU worker whose device has no room left; here, the CPU stands in
    monkeypatch.setattr(refworker, "host_available_bytes", lambda: 2**40)
    seen: list = []
    _oom_once(ref, seen)
    ref64, native = ref.references(0, seed=13, dist="randn")
    (x,) = _inputs(ref, 13)
    assert ref64[0].dtype == torch.float64 and torch.allclose(ref64[0], 2 * x.double())
    assert torch.equal(native[0], 2 * x)
    # the GPU's float64 pass (out of memory), its FLOPs counted on the meta device, the
    # float64 pass in host memory, the native pass
    assert seen == [(torch.float64, "cpu"), (torch.float32, "meta"), (torch.float64, "cpu"),
                    (torch.float32, "cpu")]
    assert "float64 in host memory" in ref.reference_note
    ref.mod.CHECK = None
    r = ref.compare_tensors(0, 13, "randn", [2 * x])
    assert r["passed"] and r["reason"] == ""  # the next call's float64 pass fitted again


def test_without_room_anywhere_or_for_a_costly_forward_the_reference_is_fp32_and_says_so(
        tmp_path, monkeypatch):
    for room, flops in ((0, 0), (2**40, 10**15)):
        ref = _reference(tmp_path, "x.mul_(2)")
        ref.gpu = True
        monkeypatch.setattr(refworker, "host_available_bytes", lambda room=room: room)
        monkeypatch.setattr(refworker, "_meta_forward", lambda *a, flops=flops: (flops, 0))
        seen: list = []
        _oom_once(ref, seen)
        ref64, _ = ref.references(0, seed=17, dist="randn")
        (x,) = _inputs(ref, 17)
        assert ref64[0].dtype == torch.float32 and torch.equal(ref64[0], 2 * x)
        assert "fp32 arithmetic" in ref.reference_note and "no room" in ref.reference_note
        _oom_once(ref, [])
        r = ref.compare_tensors(0, 17, "randn", [2 * x])
        assert r["passed"] and f"reference: {FP32_REFERENCE}" in r["reason"]
        assert r["reference"] == "fp32"


def test_a_float64_op_that_raises_is_named_in_the_comparison(tmp_path):
    ref = _reference(tmp_path, "if x.dtype == torch.float64:\n"
                               "            raise RuntimeError('no float64 kernel')")
    (x,) = _inputs(ref, 19)
    r = ref.compare_tensors(0, 19, "randn", [x.clone()])
    assert r["passed"]
    assert r["reason"] == f"reference: {FP32_REFERENCE} (the float64 pass raised RuntimeError)"


def test_an_evaluation_on_an_fp32_reference_is_flagged():
    from cutegen.codegen.eval.verdict import reference_flags

    fallback = {"passed": True, "reference": "fp32",
                "reason": f"reference: {FP32_REFERENCE} (the float64 pass raised RuntimeError)"}
    assert reference_flags([("main/randn", {"passed": True, "reason": ""}),
                            ("main/large", fallback)]) == ["review:fp32_reference"]
    host = {"passed": True, "reference": "host64",
            "reason": "reference: float64 in host memory (the GPU had no room for the float64 "
                      "pass)"}
    assert reference_flags([("main/randn", host), ("main/large", {"passed": False})]) == []


@pytest.mark.gpu
def test_on_the_gpu_the_float64_pass_without_room_runs_on_the_host_and_compares_there(
        tmp_path, monkeypatch):
    """The same fallback with CUDA tensors: the draw on the GPU, the float64 pass and the
    comparison (the candidate's output read back) in host memory."""
    ref = _reference(tmp_path, "x.mul_(2)")
    ref.gpu, ref.device = True, "cuda"
    ref.models[0] = ref.models[0].cuda()
    monkeypatch.setattr(refworker, "host_available_bytes", lambda: 2**40)
    seen: list = []
    _oom_once(ref, seen)
    ref64, native = ref.references(0, seed=23, dist="randn")
    assert ref64[0].device.type == "cpu" and ref64[0].dtype == torch.float64
    assert native[0].device.type == "cuda"
    assert torch.allclose(ref64[0], native[0].double().cpu())
    _oom_once(ref, [])
    r = ref.compare_tensors(0, 23, "randn", [native[0].clone()])
    assert r["passed"] and "float64 in host memory" in r["reason"]
    assert r["reference"] == "host64"
    wrong = native[0].clone()
    wrong[0, 0] += 1.0
    _oom_once(ref, [])
    assert not ref.compare_tensors(0, 23, "randn", [wrong])["passed"]


def _native_oom_once(ref: Reference, seen: list) -> None:
    """The first native (fp32) forward runs out of GPU memory, after the float64 pass left
    its reference on the GPU (KernelBench L1 63 on an 80 GB H100: 17.1 GB of float64
    output, then the 8.6 GB native one beside a candidate's 41 GiB); every forward notes its
    input's dtype."""
    fired: list = []

    def check(x):
        seen.append(x.dtype)
        if x.dtype == torch.float32 and not fired:
            fired.append(True)
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    ref.mod.CHECK = check


def test_a_comparison_without_room_for_both_references_parks_the_native_one(tmp_path):
    """Before: the comparison's out-of-memory error ended the candidate as ``oom`` though the
    references fit one after the other. Now it runs again with the native pass first and
    its outputs in host memory, and the shape's next comparisons start that way."""
    ref = _reference(tmp_path, "x.mul_(2)")
    ref.gpu = True  # a GPU worker short of memory; here, the CPU stands in
    seen: list = []
    _native_oom_once(ref, seen)
    (x,) = _inputs(ref, 29)
    r = ref.compare_tensors(0, 29, "randn", [2 * x])
    assert r["passed"] and r["reason"] == "" and r["reference"] == ""
    # the float64 pass, the native one (out of memory); then native first, float64 second
    assert seen == [torch.float64, torch.float32, torch.float32, torch.float64]
    assert ref.park_native == {0}
    seen.clear()
    (y,) = _inputs(ref, 31)
    wrong = 2 * y
    wrong[0, 0] += 1.0
    assert not ref.compare_tensors(0, 31, "randn", [wrong])["passed"]
    assert seen == [torch.float32, torch.float64]  # no second attempt with both on the GPU
    ref64, native = ref.references(0, seed=31, dist="randn", park_native=True)
    assert torch.equal(native[0], 2 * y) and torch.allclose(ref64[0], 2 * y.double())


def test_a_parked_comparison_out_of_memory_is_an_oom_verdict(tmp_path):
    ref = _reference(tmp_path)
    ref.gpu = True
    ref.park_native.add(0)

    def check(x):
        raise torch.OutOfMemoryError("CUDA out of memory")
    ref.mod.CHECK = check
    (x,) = _inputs(ref, 3)
    with pytest.raises(torch.OutOfMemoryError):  # take() turns it into the oom verdict
        ref.compare_tensors(0, 3, "randn", [x])


@pytest.mark.gpu
def test_on_the_gpu_a_parked_native_reference_waits_in_host_memory(tmp_path):
    ref = _reference(tmp_path, "x.mul_(2)")
    ref.gpu, ref.device = True, "cuda"
    ref.models[0] = ref.models[0].cuda()
    ref64, native = ref.references(0, seed=37, dist="randn", park_native=True)
    assert native[0].device.type == "cpu" and ref64[0].device.type == "cuda"
    assert torch.allclose(ref64[0].cpu(), native[0].double())
    got = native[0].cuda()
    ref.park_native.add(0)
    r = ref.compare_tensors(0, 37, "randn", [got])
    assert r["passed"] and r["reason"] == ""
    got[0, 0] += 1.0
    assert not ref.compare_tensors(0, 37, "randn", [got])["passed"]


# -- the inputs drawn where they live ---------------------------------------------------------
# KernelBench L1 45 (16 x 64 x 2048 x 2048 fp32, 16 GiB) ended its run on an 80 GB H100
# (2026-12-06): the baselines held an input of their own and a fresh draw beside the shared
# buffers, and every prepared call drew a 16 GiB copy before writing it into its buffer.

class _NewTensors(TorchDispatchMode):
    """The element counts (and dtypes) of the tensors ops return in memory other than
    ``own``'s or one already seen (a view, or a value written in place).

    The tensors seen are kept alive until the mode is dropped: freed, their memory could be
    handed out again, and a new tensor there would pass for one already seen (the float64
    pass's test failed so once on CI, depending on what the process had allocated before)."""

    def __init__(self, own: list) -> None:
        super().__init__()
        self.seen = {t.untyped_storage().data_ptr() for t in own}
        self.sizes: list[int] = []
        self.new: list[tuple[torch.dtype, int]] = []
        self.kept: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.seen:
                self.seen.add(t.untyped_storage().data_ptr())
                self.sizes.append(t.numel())
                self.new.append((t.dtype, t.numel()))
                self.kept.append(t)
        return out


def test_the_new_tensor_probe_counts_a_tensor_in_memory_freed_under_it():
    """The probe itself: a tensor in the memory of one seen and freed under it is new (the
    allocator handed an 800 KB block straight back, and the probe took the second tensor
    for the first: the float64 pass's test failed on CI by it)."""
    with _NewTensors([]) as seen:
        a = torch.empty(100_000, dtype=torch.float64).fill_(1.0)
        del a
        b = torch.empty(100_000, dtype=torch.float32).fill_(2.0)
        del b
    assert seen.new == [(torch.float64, 100_000), (torch.float32, 100_000)]


@pytest.mark.parametrize("dist", ["randn", "spiky", "randn_mean3", "uniform", "large", "small",
                                  "negative", "zeros"])
def test_refill_draws_fp32_and_integer_inputs_into_their_own_memory(dist):
    specs = [ArgSpec("tensor", (64, 33), "float32"), ArgSpec("tensor", (40,), "int64", 0, 9),
             ArgSpec("value", value=1.5), ArgSpec("tensor", (17,), "bfloat16"),
             ArgSpec("tensor", (300,), "bool")]
    want = generate(specs, seed=4, distribution=dist, device="cpu", vary_scalars=True)
    bufs = [torch.full((64, 33), 7.0), torch.zeros(40, dtype=torch.int64), 1.5,
            torch.zeros(17, dtype=torch.bfloat16), torch.zeros(300, dtype=torch.bool)]
    with _NewTensors([bufs[0], bufs[1]]) as seen:
        got = refill(bufs, specs, seed=4, distribution=dist, vary_scalars=True)
    assert 64 * 33 not in seen.sizes and 40 not in seen.sizes  # before: a fresh draw each
    # every tensor returned is its buffer, holding the draw: a bool mask was drawn beside
    # its buffer and returned, the buffer left as it was (every candidate given a mask was
    # "input_modified" on the H100, and saw the same stale mask on every call)
    assert all(got[k] is bufs[k] for k in (0, 1, 3, 4))
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert bufs[4].any()
    assert got[2] != 1.5  # the varied scalar, as generate gives it


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "int64",
                                   "int32", "int16", "int8", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(), (1,), (7, 3), (2, 0, 5)])
def test_refill_fills_every_dtype_s_buffer_with_what_generate_draws(dtype, shape):
    """Every input dtype a task can hand over, drawn into an uninitialised buffer of its
    own dtype (as the shared allocations are): the buffer holds generate's values and is
    what refill returns (the bool case did neither before)."""
    low, high = (0, 2) if dtype in ("bool", "uint8") else (-3, 9)
    specs = [ArgSpec("tensor", shape, dtype, low, high), ArgSpec("tensor", (33,), "float32")]
    for dist in ("randn", "spiky", "uniform"):
        want = generate(specs, seed=21, distribution=dist, device="cpu")
        bufs = [torch.empty(shape, dtype=getattr(torch, dtype)), torch.empty(33)]
        got = refill(bufs, specs, seed=21, distribution=dist)
        assert got[0] is bufs[0] and got[1] is bufs[1]
        assert torch.equal(bufs[0], want[0]) and torch.equal(bufs[1], want[1]), dist


def test_a_prepared_call_draws_its_inputs_into_the_shared_buffer(tmp_path):
    ref = _reference(tmp_path)
    ref.buffers[0] = [torch.empty(6, 5)]  # on the GPU, the dedicated shared allocation
    with _NewTensors(ref.buffers[0]) as seen:
        ref.prepare(0, seed=12, dist="large")
    assert 30 not in seen.sizes  # before: the draw, then a copy into the buffer
    assert torch.equal(ref.buffers[0][0], _inputs_of(ref, 12, "large")[0])
    assert ref._inputs_intact(0) == ""


def test_a_bool_mask_is_drawn_into_its_buffer_on_every_call(tmp_path):
    """A task with a bool mask operand (``x.masked_fill(mask, 0)``): the mask's buffer kept
    its first contents while the input check drew a fresh mask, so every candidate was
    "input_modified", and one that ignored the mask could not be told apart by its inputs."""
    task = tmp_path / "task.py"
    task.write_text(TASK.replace("def forward(self, x):", "def forward(self, x, m):")
                    .replace("return [torch.randn(6, 5)]",
                             "return [torch.randn(6, 5), torch.rand(6, 5) > 0.5]")
                    .replace("BODY", "x = x.masked_fill(m, 0.0)"))
    ref = Reference(str(task), gpu=False, scratch=tmp_path)
    ref.load(hidden=False, seed_init=0)
    ref.models[0] = ref.mod.Model(*ref.shapes[0]["init_args"])
    ref.buffers[0] = [torch.empty(6, 5), torch.zeros(6, 5, dtype=torch.bool)]
    masks = []
    for seed in (12, 13):
        ref.prepare(0, seed=seed, dist="randn")
        assert ref._inputs_intact(0) == ""
        assert torch.equal(ref.buffers[0][1], _inputs_of(ref, seed, "randn")[1])
        masks.append(ref.buffers[0][1].clone())
    assert not torch.equal(masks[0], masks[1])


def _inputs_of(ref: Reference, seed: int, dist: str) -> list:
    specs = [ArgSpec.from_dict(s) for s in ref.shapes[0]["specs"]]
    return generate(specs, seed=seed, distribution=dist, device="cpu")


class _NoRecords:
    def drain(self) -> list:
        return []


@pytest.mark.gpu
def test_on_the_gpu_a_baseline_without_room_is_said_and_the_run_goes_on(tmp_path):
    """Before: the eager forward's out-of-memory error ended the run (an infrastructure
    error); now the baselines say it and the candidate's evaluation stands without them."""
    # (on the CUDA device only: loading checks the reference once on the CPU)
    ref = _reference(tmp_path, "if x.is_cuda: raise torch.OutOfMemoryError('CUDA out of memory')")
    ref.gpu, ref.device = True, "cuda"
    ref.models[0] = ref.models[0].cuda()
    ref.buffers[0] = [torch.empty(6, 5, device="cuda")]
    ref.current[0] = (3, "randn", False)
    got = ref.baselines(warmup=1, runs=2, flush_bytes=2**20, seed0=5, dist="randn",
                        with_compile=True, observer=_NoRecords())
    assert "eager" not in got and got["eager_error"].startswith("OutOfMemoryError")
    assert "not timed" in got["compiled_error"]
    assert 0 not in ref.current  # the buffers no longer hold that call's inputs


@pytest.mark.gpu
def test_on_the_gpu_refill_draws_what_generate_draws():
    """The input check and the native pass draw with ``generate``; the buffers are filled by
    ``refill`` and the float64 pass draws with ``generate_float64``: on the GPU too they must
    hold the same values, bit for bit, or every candidate would look like it changed its
    inputs (or be judged against other inputs)."""
    specs = [ArgSpec("tensor", (300, 1001), "float32"), ArgSpec("tensor", (77,), "int32", -5, 9),
             ArgSpec("tensor", (33, 3), "bfloat16"), ArgSpec("tensor", (5,), "bool")]
    for dist in ("randn", "spiky", "randn_mean3", "uniform", "large", "small", "negative", "zeros"):
        want = generate(specs, seed=11, distribution=dist, device="cuda")
        bufs = [torch.empty(300, 1001, device="cuda"),
                torch.empty(77, dtype=torch.int32, device="cuda"),
                torch.empty(33, 3, dtype=torch.bfloat16, device="cuda"),
                torch.empty(5, dtype=torch.bool, device="cuda")]
        got = refill(bufs, specs, seed=11, distribution=dist)
        assert all(g is b for g, b in zip(got, bufs, strict=True)), dist
        assert all(torch.equal(a, b) for a, b in zip(bufs, want, strict=True)), dist
        wide = generate_float64(specs, seed=11, distribution=dist, device="cuda")
        assert all(torch.equal(a.double() if a.is_floating_point() else a, b)
                   for a, b in zip(want, wide, strict=True)), dist


def test_the_float64_pass_draws_its_inputs_in_float64_memory(tmp_path):
    """KernelBench L1 45 (16 GiB fp32 input): the float64 pass held the fp32 draw beside its
    float64 copy, 48 GiB, and on an 80 GB H100 went to host memory; now the fp32 values
    are drawn inside the float64 memory and widened there (the native pass still draws
    its own fp32 inputs, after the float64 ones are let go)."""
    ref = _reference(tmp_path, "x = x.sum(dim=0)")
    with _NewTensors([]) as seen:
        ref64, native = ref.references(0, seed=8, dist="randn_mean3")
    assert seen.new.count((torch.float32, 30)) == 1  # before: 2 (the float64 pass's draw)
    (x,) = _inputs_of(ref, 8, "randn_mean3")
    assert torch.equal(ref64[0], x.double().sum(dim=0))
    assert torch.equal(native[0], x.sum(dim=0))


@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (7, 5), (0, 4), (1001,), (64, 33, 3)])
def test_float64_inputs_are_the_inputs_widened(shape):
    specs = [ArgSpec("tensor", shape, "float32"), ArgSpec("tensor", (9,), "int64", 0, 5),
             ArgSpec("value", value=2.0), ArgSpec("tensor", (5,), "bfloat16")]
    for dist in ("randn", "spiky", "randn_mean3", "uniform", "large", "small", "negative", "zeros"):
        want = generate(specs, seed=3, distribution=dist, device="cpu", vary_scalars=True)
        got = generate_float64(specs, seed=3, distribution=dist, device="cpu",
                               vary_scalars=True)
        assert got[2] == want[2] and torch.equal(got[1], want[1])
        for k in (0, 3):  # the bf16 one rounded to bf16 first, as the task sees it
            assert got[k].dtype == torch.float64 and torch.equal(got[k], want[k].double())


def _no_room(*a, **k):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")


@pytest.mark.parametrize("where", ["input check", "draw"])
def test_inputs_without_room_are_an_oom_verdict_not_a_worker_error(tmp_path, monkeypatch, where):
    """Where the reference worker had no room beside the candidate's process, its exception
    left it as an error and ended the search (as the baselines' did for KernelBench L1 45);
    now it is the call's ``oom``. "input check": the check that the candidate left its inputs
    alone draws them again; "draw": a bf16 / fp16 input is drawn through an fp32 tensor of
    its size."""
    ref = _reference(tmp_path)
    ref.buffers[0] = [torch.empty(6, 5)]
    ref.prepare(0, seed=2, dist="randn")
    if where == "input check":
        monkeypatch.setattr(ref, "_draw", _no_room)
        got = ref.take(shape=0, outputs=[], mode="compare", slot=None)
    else:
        monkeypatch.setattr(refworker, "refill", _no_room)
        got = ref.prepare(0, seed=3, dist="randn")
        assert got["ok"] is False and 0 not in ref.current  # the buffers hold no call's inputs
    assert got["verdict"] == "oom" and not got["passed"]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_distributions_on_which_the_reference_is_nan_everywhere_are_left_out(tmp_path, device):
    """Before: KernelBench L1 98's ``kl_div(log(p), q)`` is NaN for every distribution with a
    negative value, and those trials (and the randn timed calls) passed a kernel that wrote
    NaN. The reference worker now keeps only the distributions on which the task's own output
    has a finite value, and a task with none is a fault of the task."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    ref = _reference(tmp_path, "return torch.log(x * self.scale).sum()")
    ref.models[0] = ref.models[0].to(device)
    ref.buffers[0] = [torch.empty(6, 5, device=device)]
    ref.current[0] = (3, "randn", False)
    kept, dropped = ref.informative(refworker.DISTRIBUTIONS, seed=3)
    assert {"randn", "spiky", "large", "small", "negative"} <= set(dropped)
    # positive inputs, and positive spikes in the place of the spiky ones
    assert {"uniform", "uniform_spiky"} <= set(kept)
    assert sorted(kept + dropped) == sorted(refworker.DISTRIBUTIONS + ("uniform_spiky",))
    assert 0 not in ref.current  # the buffers no longer hold a call's inputs
    assert ref.informative(["uniform"], seed=3) == (["uniform"], [])

    nan = _reference(tmp_path, "return x.sum() * float('nan')")
    nan.models[0] = nan.models[0].to(device)
    nan.buffers[0] = [torch.empty(6, 5, device=device)]
    with pytest.raises(refworker.TaskFault, match="NaN or Inf everywhere"):
        nan.informative(["randn", "uniform"], seed=3)
    picky = _reference(tmp_path, "if bool((x < 0).any()): raise ValueError('x must be >= 0')",
                       dists='["uniform"]')
    picky.models[0] = picky.models[0].to(device)
    picky.buffers[0] = [torch.empty(6, 5, device=device)]
    assert picky.load_dist == "uniform"  # (its load ran it on what it allows: randn raised)
    kept, dropped = picky.informative(["randn", "uniform"], seed=3)
    assert (kept, dropped) == (["uniform"], ["randn"])  # it refuses negative inputs
    fine = _reference(tmp_path)  # finite outputs: every distribution kept
    fine.models[0] = fine.models[0].to(device)
    fine.buffers[0] = [torch.empty(6, 5, device=device)]
    assert fine.informative(refworker.DISTRIBUTIONS, seed=3) == (
        list(refworker.DISTRIBUTIONS), [])


@pytest.mark.parametrize(("dists", "says"), [('["randn", "gaussian"]', "unknown distributions"),
                                             ("[]", "is empty")])
def test_input_distributions_are_checked_before_the_reference_runs(tmp_path, dists, says):
    """The names are checked before load draws anything with them (an unknown one reached
    the draw on the GPU as "the reference raised"; an empty list passed and left the plan
    with nothing to verify on)."""
    with pytest.raises(refworker.TaskFault, match=says):
        _reference(tmp_path, dists=dists)


def test_the_calls_cudnn_runs_in_tf32_by_default_are_seen():
    """The baselines time eager a second time with cuDNN in TF32 (torch's default) only where
    the forward calls what cuDNN runs in TF32: convolutions (modules and functional, forward
    and transposed) and recurrent layers on fp32 operands; a Linear or a matmul is not one of
    them, nor a bf16 conv (it ran the same with the flag on: a bf16 conv task's "TF32" eager
    was its eager timed twice)."""
    import torch.nn as nn
    import torch.nn.functional as F

    cases = [(nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 8, 8),), {"conv2d"}),
             (nn.ConvTranspose3d(2, 2, 3), (torch.randn(1, 2, 4, 4, 4),), {"conv_transpose3d"}),
             (lambda x: F.conv1d(x, torch.randn(3, 2, 2)), (torch.randn(1, 2, 5),), {"conv1d"}),
             (nn.LSTM(4, 5, batch_first=True), (torch.randn(2, 3, 4),), {"lstm"}),
             (nn.GRU(4, 5), (torch.randn(3, 2, 4),), {"gru"}),
             (nn.Linear(4, 4), (torch.randn(2, 4),), set()),
             (lambda a: (a @ a).to(torch.float64).sum(), (torch.randn(4, 4),), set()),
             # TF32 is for fp32 operands only: a bf16 conv or LSTM runs the same either way
             (nn.Conv2d(3, 4, 3).to(torch.bfloat16),
              (torch.randn(1, 3, 8, 8, dtype=torch.bfloat16),), set()),
             (nn.LSTM(4, 5).to(torch.bfloat16), (torch.randn(3, 2, 4, dtype=torch.bfloat16),),
              set()),
             (lambda x: F.conv1d(x, weight=torch.randn(3, 2, 2)), (torch.randn(1, 2, 5),),
              {"conv1d"})]
    for fn, args, names in cases:
        seen = refworker._cudnn_tf32_calls()
        with torch.no_grad(), seen:
            fn(*args)
        assert seen.names == names, (fn, seen.names)


def test_eager_in_tf32_is_timed_with_the_flag_on_and_never_fatal():
    """The baselines' second eager (cuDNN in TF32, torch's default), with the baselines' timer
    replaced: timed with the flag on where the forward runs a conv, the flag off again after
    it (and after a forward that raises in TF32); no timing for a Linear; a forward that
    fails under the detecting mode is reported, not raised (the baselines were the run's
    infrastructure: an exception there ended a search)."""
    import torch.nn as nn

    flags: list[bool] = []

    def timed(fn):
        flags.append(torch.backends.cudnn.allow_tf32)
        fn()
        return [1.0, 2.0]

    def failing(fn):
        raise RuntimeError("cuDNN error in TF32")

    class Picky(nn.Module):
        def forward(self, x):
            if torch._C._is_torch_function_mode_enabled():
                raise TypeError("no modes here")
            return x

    was = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # as the reference worker sets it
    try:
        conv, x = nn.Conv2d(3, 4, 3), torch.randn(1, 3, 8, 8)
        got = refworker.eager_in_tf32(conv, [x], timed)
        assert got == {"tf32_ops": ["conv2d"], "eager_tf32": [1.0, 2.0]} and flags == [True]
        assert torch.backends.cudnn.allow_tf32 is False
        assert refworker.eager_in_tf32(nn.Linear(4, 4), [torch.randn(2, 4)], timed) == {}
        got = refworker.eager_in_tf32(conv, [x], failing)
        assert "eager_tf32" not in got and got["eager_tf32_error"].startswith("RuntimeError")
        assert torch.backends.cudnn.allow_tf32 is False
        got = refworker.eager_in_tf32(Picky(), [x], timed)
        assert got == {"eager_tf32_error": "TypeError: no modes here"}
    finally:
        torch.backends.cudnn.allow_tf32 = was
