"""The conv family's host path: what one call launches once the first call has set it up.

The GPU waited on Python between a conv call's launches (the observer's spans were 4-80x the
CuTe kernels' time), so everything a call derives from shapes is built once per shape
(``_conv_plan``) and the packed filter is kept on the module while its weight is unchanged
(``_conv_weights``). Checked here on the CPU by loading a rendered candidate in a child
process with every compiled kernel replaced by a recorder: which launches each call makes,
with which arguments, and that an in-place weight update, a new weight Parameter or a new
shape packs the filter again.
"""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")

_DRIVER = fd.CHILD_PRELUDE + r'''
# a small shape of the task's kind: the launch path does not depend on the sizes
for k, v in {"batch_size": 2, "height": 9, "width": 10}.items():
    if hasattr(task, k):
        setattr(task, k, v)
cand = load("cand", cand_path)
calls = []

class Recorder(dict):
    def get(self, key, default=None):
        def launch(*args):
            calls.append({"kind": key[0], "args": args})
        return launch

cand._conv_compiled = Recorder()
from cuda.bindings import driver as cuda
cand._stream = lambda: cuda.CUstream(0)
torch.manual_seed(0)
m = cand.ModelNew(*task.get_init_inputs())
x = task.get_inputs()[0]
conv = next(mod for mod in m.modules() if isinstance(mod, torch.nn.modules.conv._ConvNd))
log = {}

def step(name, inp):
    calls.clear()
    with torch.no_grad():
        y = m(inp)
    log[name] = {"kinds": [c["kind"] for c in calls], "shape": list(y.shape)}

step("first", x)
step("second", x)
step("third", x.clone())
with torch.no_grad():
    conv.weight.mul_(2.0)
step("after_inplace", x)
conv.weight = torch.nn.Parameter(conv.weight.detach().clone())
step("after_new_param", x)
x2 = torch.cat([x, x])
step("new_shape", x2)
step("new_shape_again", x2)
step("old_shape", x)
log["plans"] = len(cand._conv_plans)
# the tuple arguments go marshalled (C pointers taken once), and what they point at is still
# the plan's values after many calls and a collection
import ctypes, gc
gc.collect()
conv_args = [c["args"] for c in calls if c["kind"] == "conv"][-1]
log["arg_types"] = [type(a).__name__ for a in conv_args]
geo = conv_args[3]
log["geo_read"] = [ctypes.c_int32.from_address(p.value).value for p in geo.__c_pointers__()]
log["geo_vals"] = [int(v.value) for v in geo.vals]
print(json.dumps(log))
'''


def _host_log(name: str) -> dict:
    return fd.run_child(_DRIVER, name, timeout=300)


@pytest.mark.parametrize("name, runs, groups, split", [
    ("conv2d_bf16", 1, 1, 0),
    ("conv2d_grouped_bf16", 1, 4, 0),
    ("conv_transpose2d_bf16", 4, 1, 0),  # stride 2 in two dims: four output phases
    # split-K by default (a fixed count: at this small shape too): the slices' sum last
    ("conv2d_deep_small_fp32", 1, 1, 1),
])
def test_the_filter_is_packed_once_per_weight_and_shape(name, runs, groups, split):
    log = _host_log(name)
    full = ["cpack"] + ["wpack"] * runs + ["conv"] * (runs * groups) + ["csplit"] * split
    packed = ["cpack"] + ["conv"] * (runs * groups) + ["csplit"] * split
    # the first call packs the filter of every run; the next reuse it, whatever the input
    assert sorted(log["first"]["kinds"]) == sorted(full), log["first"]
    assert log["second"]["kinds"] == packed, log["second"]
    assert log["third"]["kinds"] == packed, log["third"]
    # a weight changed in place, or a new Parameter, is packed again (then kept)
    assert sorted(log["after_inplace"]["kinds"]) == sorted(full), log["after_inplace"]
    assert sorted(log["after_new_param"]["kinds"]) == sorted(full), log["after_new_param"]
    # a new shape is a new plan and a new packing; going back packs again (one kept at a time)
    assert sorted(log["new_shape"]["kinds"]) == sorted(full), log["new_shape"]
    assert log["new_shape_again"]["kinds"] == packed, log["new_shape_again"]
    assert sorted(log["old_shape"]["kinds"]) == sorted(full), log["old_shape"]
    assert log["new_shape"]["shape"][0] == 2 * log["first"]["shape"][0]
    assert log["plans"] == 2
    # x, w, out pointers; then geometry, epilogue operands, row operands, scalars (tuples at
    # compile time) marshalled once; the stream
    assert log["arg_types"][3:7] == ["_Marshalled"] * 4, log["arg_types"]
    assert log["geo_read"] == log["geo_vals"] and len(log["geo_vals"]) > 10


def test_split_k_is_off_for_outputs_past_32_bit_offsets(tmp_path):
    """The K slices sit one output apart in the workspace, at 32-bit offsets: an output of
    2^31 elements or more takes one slice whatever ``split_k`` says."""
    mod = fd.rendered_module(tmp_path, "conv2d_deep_small_fp32")
    assert mod.TUNABLES["split_k"] == 4
    assert mod._conv_splits({"out_shape": (16, 512, 7, 7)}, 4) == 4
    assert mod._conv_splits({"out_shape": (16, 512, 7, 7)}, 1) == 1
    assert mod._conv_splits({"out_shape": (2048, 512, 64, 32)}, 8) == 1
