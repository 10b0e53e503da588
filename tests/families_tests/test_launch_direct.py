"""The direct launch (``_go`` in head.py.tmpl): the C values a rendered candidate hands its
compiled kernels are the DSL's own, taken without the DSL's per-launch marshalling.

The GPU waited on Python between a call's launches (a three-launch batch-norm style call
spent 225 us of host time on the H200 against 105 us of kernels), much of it in the DSL's
call re-deriving every argument's C value through its adapters. ``_go`` takes the values
itself once ``_direct_ok`` has checked, for that compiled function, that the DSL's marshalling
of the same arguments gives the same bytes. Checked here on the CPU with real sm_90a compiles
and the compiled program's run replaced by a recorder: on every launch of two calls (fresh
inputs, so fresh pointers), the values launched equal what the DSL's marshalling gives for the
same arguments, entry by entry and byte by byte; and a function the check refuses goes
through the DSL's call.
"""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")

_DRIVER = fd.CHILD_CAND + r'''
import ctypes
cand.REPLAY = False  # every call through _go (replays have test_replay.py)
ran = []  # (launched C values, as bytes) per run of a compiled program

def c_bytes(e):
    # what an entry points at: a scalar's C value is kept alive on its pointer (its size
    # known); pointers and stream handles are 8 bytes
    keep = getattr(e, "_cutlass_keepalive", None)
    addr = e if isinstance(e, int) else e.value
    return ctypes.string_at(addr, ctypes.sizeof(keep) if keep is not None else 8).hex()

dsl_calls = []

def record(self, exe):
    ran.append([c_bytes(e) for e in exe])

je.JitCompiledFunction.run_compiled_program = record
original_call = je.JitCompiledFunction.__call__

def dsl_call(self, *args, **kwargs):
    dsl_calls.append(type(self).__name__)
    return original_call(self, *args, **kwargs)

je.JitCompiledFunction.__call__ = dsl_call
go = cand._go
launches = []  # per _go: what the DSL's marshalling gives for the same arguments

def checked_go(fn, *args):
    before = len(ran)
    out = go(fn, *args)
    theirs, _ = fn.generate_execution_args(*cand._real(args))
    launches.append({"direct": len(ran) == before + 1,
                     "same": ran[before:] == [[c_bytes(e) for e in theirs]]})
    return out

cand._go = checked_go
torch.manual_seed(0)
m = cand.ModelNew(*task.get_init_inputs())
with torch.no_grad():
    m(*task.get_inputs())
    first = len(launches)
    m(*task.get_inputs())
log = {"launches": list(launches), "first": first, "dsl_calls": len(dsl_calls),
       "direct_ok": [v[1] for v in cand._DIRECT.values()]}
# a function whose marshalling differs from _flat's is refused and goes through the DSL's call
fn = list(cand._DIRECT.values())[-1][0]  # one launched on every call
real_gen = fn.generate_execution_args
def off_by_one(*a, **k):
    exe, keep = real_gen(*a, **k)
    exe = list(exe)
    exe[0] = ctypes.c_void_p(cand._entry(exe[0]) + 8)
    return exe, keep
cand._DIRECT.clear()
fn.generate_execution_args = off_by_one
calls_before = len(dsl_calls)
with torch.no_grad():
    m(*task.get_inputs())
log["refused"] = [v[1] for v in cand._DIRECT.values() if v[0] is fn]
log["dsl_calls_after_refusal"] = len(dsl_calls) - calls_before
print(json.dumps(log))
'''


def _log(name: str) -> dict:
    return fd.run_child(_DRIVER, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "batch_center_fp32",  # row sums, a strided sum, a pointwise map with a per-channel operand
    "batch_norm_fp32",  # Welford partials, the batch-statistics kernel, the normalising map
    "max_pool2d_fp32",  # the pool family
    "cumsum_fp32",  # the scan family
    "cross_entropy_bf16",  # a row loss and its reduction over rows
    "gemm_bias_relu_bf16",  # the GEMM family: operand packs and the product
    "conv2d_groupnorm_scale_maxpool_clamp_bf16",  # packs, the implicit GEMM, the conv tails
    "conv2d_depthwise_bf16",  # the direct depthwise kernel
    "cosine_loss_fp32",  # three row sums in one launch, each written to its own output
])
def test_every_launch_hands_over_the_dsls_own_values(name):
    log = _log(name)
    launches = log["launches"]
    assert log["first"] >= 1 and len(launches) >= 2 * log["first"] - 1, log
    assert all(x["direct"] for x in launches), launches  # none through the DSL's call
    assert log["dsl_calls"] == 0, log  # and no launch that bypassed _go
    assert all(x["same"] for x in launches), launches  # the DSL's bytes, on every launch
    assert log["direct_ok"] and all(log["direct_ok"]), log
    # a function whose marshalling the check cannot match is launched by the DSL's call
    assert log["refused"] == [False], log
    assert log["dsl_calls_after_refusal"] >= 1, log
