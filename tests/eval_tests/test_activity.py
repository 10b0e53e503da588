"""The parent's reading of the observer's records (pure): windows, harness memsets, CuTe vs
foreign time, spans, work outside the calls, kernel identity and mimics."""

from __future__ import annotations

from cutegen.codegen.eval.activity import (
    FOREIGN_ABS_US,
    Identity,
    Module,
    Op,
    Window,
    analyse,
    identity,
)

US = 1000  # ns
CUTE = "kernel_cutlass_scale_shift_kernel_0"
FLUSH = 256 * 2**20


def _ident(*names: str) -> Identity:
    return Identity(frozenset(names), frozenset(), (), True)


def _call(k: int, t0: int, *, cute_us: float = 50.0, extra: tuple[Op, ...] = (),
          prefill: tuple[int, ...] = (4096,)) -> tuple[Window, list[Op]]:
    """One honest call at t0 (µs): prefill memsets, the flush, then the CuTe kernel."""
    t = t0 * US + 10 * US
    ops = []
    for n in prefill:
        ops.append(Op("memset", "memset", t, t + 2 * US, nbytes=n))
        t += 3 * US
    ops.append(Op("memset", "memset", t, t + 60 * US, nbytes=FLUSH))
    flush_end = t + 60 * US
    ops.append(Op("kernel", CUTE, flush_end + 2 * US, flush_end + 2 * US + int(cute_us * US)))
    ops.extend(extra)
    return Window(k, t0 * US, t0 * US + 1000 * US, (*prefill, FLUSH)), ops


def test_honest_calls_split_into_harness_and_candidate_work():
    w0, ops0 = _call(0, 0)
    w1, ops1 = _call(1, 2000, cute_us=40.0)
    a = analyse(ops0 + ops1, [w0, w1], _ident(CUTE))
    assert not a.outside and not a.incomplete
    c = a.calls[1]
    assert c.harness_ok and len(c.harness) == 2
    assert c.cute_kernels == 1 and c.foreign_us == 0
    assert abs(c.span_us - 40.0) < 1e-6
    assert abs(c.event_expect_us - 42.0) < 1e-6  # from the flush's end: the launch gap counts
    assert not c.foreign_over_allowance


def test_torch_doing_the_work_is_foreign_time():
    softmax = Op("kernel", "void at::native::cunn_SoftMaxForward<4, float>", 0, 0)
    w, ops = _call(0, 0, cute_us=2.0)
    end = ops[-1].end_ns
    ops.append(Op("kernel", softmax.name, end + US, end + 80 * US))
    a = analyse(ops, [w], _ident(CUTE))
    c = a.calls[0]
    assert c.foreign_us == 79.0 and c.foreign_over_allowance
    assert c.foreign == (softmax.name,)


def test_a_small_fill_is_benign_and_a_small_copy_is_within_the_allowance():
    w, ops = _call(0, 0, cute_us=100.0)
    end = ops[-1].end_ns
    ops.append(Op("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                  end + US, end + 30 * US))
    ops.append(Op("memcpy", "memcpy DtoD", end + 31 * US, end + 31 * US + int(FOREIGN_ABS_US * US)))
    c = analyse(ops, [w], _ident(CUTE)).calls[0]
    assert c.benign_us == 29.0 and c.foreign_us == FOREIGN_ABS_US
    assert not c.foreign_over_allowance


def test_a_fill_kernel_named_like_the_candidates_is_not_benign():
    w, ops = _call(0, 0, cute_us=1.0)
    end = ops[-1].end_ns
    ops.append(Op("kernel", "FillFunctor_mimic", end + US, end + 90 * US))
    a = analyse(ops, [w], Identity(frozenset({CUTE, "FillFunctor_mimic"}), frozenset(), (), True))
    assert a.calls[0].cute_us == 90.0  # counted as its own kernel, not waved through


def test_work_between_calls_is_outside_every_window():
    w0, ops0 = _call(0, 0)
    w1, ops1 = _call(1, 2000)
    precompute = Op("kernel", CUTE, 1500 * US, 1600 * US)  # after done(0), before call(1)
    a = analyse(ops0 + ops1 + [precompute], [w0, w1], _ident(CUTE))
    assert a.outside == (precompute,)


def test_work_still_running_when_done_arrived_is_late():
    w, ops = _call(0, 0)
    side = Op("kernel", CUTE, 500 * US, 1500 * US, stream=7)  # ends after t1 = 1000 µs
    c = analyse(ops + [side], [w], _ident(CUTE)).calls[0]
    assert c.late == (side,)


def test_setup_work_before_the_first_call_is_allowed_unless_it_runs_into_it():
    w, ops = _call(0, 1000)
    init = Op("memcpy", "memcpy HtoD", 10 * US, 20 * US, nbytes=4096)
    persistent = Op("kernel", "spin", 30 * US, 1500 * US)
    a = analyse(ops + [init], [w], _ident(CUTE))
    assert a.setup_ops == 1 and not a.outside
    a = analyse(ops + [persistent], [w], _ident(CUTE))
    assert a.outside == (persistent,)


def test_unfinished_ops_are_incomplete():
    w, ops = _call(0, 0)
    never = Op("kernel", CUTE, 100 * US, 0)
    a = analyse(ops + [never], [w], _ident(CUTE))
    assert a.incomplete == (never,)


def test_a_bypassed_harness_shows_no_harness_memsets():
    w, ops = _call(0, 0)
    ops = [o for o in ops if o.kind != "memset"]
    c = analyse(ops, [w], _ident(CUTE)).calls[0]
    assert not c.harness_ok and c.event_expect_us is None


def test_identity_from_module_origins_and_mimics():
    def dsl(origin: str) -> bool:
        return origin == "<anonymous>"

    mods = [Module("<anonymous>", (CUTE,)), Module("/x/libtorch_cuda.so", ("at_kernel",))]
    ident = identity(mods, is_dsl_origin=dsl, claimed=("whatever",))
    assert ident.verified and ident.is_cute(CUTE) and not ident.is_cute("at_kernel")
    assert not ident.is_cute("whatever")  # a claim without a DSL-loaded module counts for nothing
    mimic = [*mods, Module("/x/cuda/bindings/cydriver.so", (CUTE,))]
    ident = identity(mimic, is_dsl_origin=dsl)
    assert ident.mimics == (CUTE,) and not ident.is_cute(CUTE)
    fallback = identity([], is_dsl_origin=dsl, claimed=(CUTE,))
    assert not fallback.verified and fallback.is_cute(CUTE)


def test_kernel_times_say_where_the_calls_gpu_work_went():
    # the chain bench of 2026-12-04 could say a call was slow but not which of its kernels
    # was: per name, the median over the calls of its summed time a call, launches a call
    from cutegen.codegen.eval.activity import kernel_times

    bn = "kernel_cutlass_kernel_cutegen_candidate_abcdef123456BatchNormKernel_object_at__ptr"
    mm = "void at::native::vectorized_elementwise_kernel<4, add>"

    def extra(end: int, bn_us: tuple[int, ...], mm_us: int) -> tuple[Op, ...]:
        out, t = [], end
        for us in bn_us:
            out.append(Op("kernel", bn, t + US, t + US + us * US))
            t += US + us * US
        if mm_us:
            out.append(Op("kernel", mm, t + US, t + US + mm_us * US))
        return tuple(out)

    w0, ops0 = _call(0, 0, cute_us=50.0)
    ops0 += extra(ops0[-1].end_ns, (10, 12), 3)
    w1, ops1 = _call(1, 2000, cute_us=40.0)
    ops1 += extra(ops1[-1].end_ns, (20,), 0)
    a = analyse(ops0 + ops1, [w0, w1], _ident(CUTE, bn))
    rows = kernel_times([a.calls[0], a.calls[1]], a.identity)
    assert [r[0] for r in rows] == [CUTE, bn, mm]  # largest first; the harness's memsets out
    assert rows[0][1:] == (45.0, 1.0, True)
    assert rows[1][1:] == (21.0, 1.5, True)  # 22 and 20 us; 2 and 1 launches
    assert rows[2][1:] == (1.5, 0.5, False)  # not in call 1: 0 there
    assert len(kernel_times([a.calls[0], a.calls[1]], a.identity, most=1)) == 1


def test_free_block_memsets_the_worker_names_are_the_harness_s():
    """The worker fills the allocator's free blocks before the prefill; their sizes come in
    its "done" message, a claim bounded by poisoned_sizes."""
    from cutegen.codegen.eval.activity import MAX_POISONED, poisoned_sizes

    assert poisoned_sizes([8 << 20, 512]) == (8 << 20, 512)
    for bad in (None, "12", [1.5], [0], [-4], [True], [1 << 50], [1] * (MAX_POISONED + 1)):
        assert poisoned_sizes(bad) == (), bad
    free = (8 << 20, 512)
    w, ops = _call(0, 0, prefill=(*free, 4096))
    c = analyse(ops, [w], _ident(CUTE)).calls[0]
    assert c.harness_ok and len(c.harness) == 4 and c.cute_kernels == 1
    # the same memsets, unclaimed (a worker that says nothing): the harness looks bypassed
    w_unclaimed = Window(0, w.t0_ns, w.t1_ns, (4096, FLUSH))
    assert not analyse(ops, [w_unclaimed], _ident(CUTE)).calls[0].harness_ok


def test_the_worker_fills_only_free_blocks_of_the_default_pool():
    from cutegen.codegen.eval.worker import free_blocks

    snapshot = [
        {"address": 1000, "segment_pool_id": (0, 0), "blocks": [
            {"address": 1000, "size": 600, "state": "active_allocated"},
            {"address": 1600, "size": 400, "state": "inactive"},
            {"address": 2000, "size": 100, "state": "active_awaiting_free"}]},
        {"address": 9000, "segment_pool_id": (1, 7), "blocks": [  # a CUDA graph's pool
            {"address": 9000, "size": 5000, "state": "inactive"}]},
        {"address": 50000, "blocks": [{"address": 50000, "size": 3000, "state": "inactive"},
                                      {"address": 53000, "size": 0, "state": "inactive"}]},
    ]
    assert free_blocks(snapshot) == [(1600, 400), (50000, 3000)]
    assert free_blocks(snapshot, limit=1) == [(50000, 3000)]  # the largest first
    assert free_blocks([]) == []


def test_a_prefill_without_room_is_a_bounded_claim_and_a_flag():
    """KernelBench L1 34 (a 7 GiB output) on an 80 GB H100: the worker's third prefill
    block (twice the output) found no room and the evaluation ended ``oom`` before any
    candidate ran; now the worker fills the blocks that fit and says how many, a claim
    bounded by prefilled_count, and the evaluation is flagged."""
    from cutegen.codegen.eval.activity import prefilled_count
    from cutegen.codegen.eval.verdict import RunFacts, decide

    assert prefilled_count(2, 3) == 2 and prefilled_count(0, 3) == 0
    for bad in (None, 4, -1, 2.0, True, "1", [1]):
        assert prefilled_count(bad, 3) == 3, bad  # taken as all: unfilled ones are missed
    w, ops = _call(0, 0, prefill=(512, 4096))
    short = Window(0, w.t0_ns, w.t1_ns, (512, FLUSH))  # the memsets of a two-block claim
    assert not analyse(ops[:1] + ops[2:], [w], _ident(CUTE)).calls[0].harness_ok
    assert analyse(ops[:1] + ops[2:], [short], _ident(CUTE)).calls[0].harness_ok
    act = analyse(ops, [w], _ident(CUTE))
    base = dict(trial_results=[("main/t0", {"passed": True})], kernel_names=[CUTE],
                finished=True, benchmarked=True, activity=act, timed_ks=(0,),
                events_us={0: 1e6}, sol_us=0.001)
    assert "review:prefill_short" not in decide(RunFacts(**base)).flags
    d = decide(RunFacts(**base, prefill_short=[0]))
    assert "review:prefill_short" in d.flags and d.verdict.value == "correct"
