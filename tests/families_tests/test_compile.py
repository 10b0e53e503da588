"""Every family and strategy compiles for sm_90a on the CPU, in fp32 and bf16, with the SASS
we design for: no local memory (no LDL/STL, zero stack frame) and 128-bit global accesses
(LDG.E.128 / STG.E.128) wherever the row length and alignment allow.

Cases (about 210 compiles, run by ``family_compile_driver.py`` in two child processes at
once, so nothing of the DSL is imported here):

* the default candidate of every covered task (the bundled ones and ``tasks/``) on its main
  shape (rows capped at 512: beyond "few rows" the row count changes nothing compiled) and
  on each of its VERIFY_SHAPES (1 row, 127 rows, odd and very long rows);
* every other strategy of every covered bundled task, and the unfused variant of every task
  with fused pointwise ops, on the main shape;
* ``fast_math`` on of every covered task that offers it (bf16 / fp16 results with a
  transcendental in a chain), main shape: an approximate tanh compiles to ``MUFU.TANH``,
  the accurate one never does;
* the long suite's tasks (issue 17) on each shape, with ``smem_row`` off and on (the row
  slice kept in shared memory between the two passes: half the global loads), with the
  ``split`` strategy (two launches) and the ``resident`` one (one persistent launch, a barrier
  in global memory; staged with plain loads and stores);
* the same three with ``l2_hints`` (main shape): the output stored, and x read for the
  last time, evict-first in L2 (``STG.E.EF`` / ``LDG.E.EF``);
* ``async_stage`` on the staged walk and the resident launch (main shape): the slice copied
  into shared memory with cp.async (``LDGSTS``), no global load of x left;
* ``l2_batch`` where it is offered (main shape): the split strategy's two kernels, launched a
  few rows at a time (each batch's plan compiled);
* every other allowed value of every knob, one knob at a time, on a representative task per
  family (softmax_bf16 and layernorm_fp32 for rows, cumsum_bf16 for scans,
  gelu_scale_bias_fp32 for pointwise), main shape. Knob combinations are not enumerated
  (the product is in the thousands); the search's moves change one knob at a time too.
"""

import math
from functools import cache, partial
from importlib.util import find_spec
from pathlib import Path

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.candidate import parse_tunables
from cutegen.codegen.families.render import knobs as family_knobs

_ESIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
_KNOB_TASKS = ("softmax_bf16", "layernorm_fp32", "cumsum_bf16", "gelu_scale_bias_fp32")

pytestmark = [pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing"),
              pytest.mark.slow]


def _build_cases() -> list[dict]:
    cases = []

    def add(name, strategy, fused, knobs, shape, group):
        tun = dict(knobs)
        cases.append({"name": name, "strategy": strategy, "fused": fused, "knobs": tun,
                      "shape": shape, "group": group})

    for name in fd.covered_task_names():
        variants = fd.variants(name)
        for shape in fd.shapes(name):
            add(name, variants[0][0], True, {}, shape, "default")
        main = fd.shapes(name)[0]
        for strategy, fused in variants[1:]:
            if not fused or name in fd.BUNDLED_COVERED:
                add(name, strategy, fused, {}, main, "variant")
    for name in fd.covered_task_names():  # approximate transcendentals, where offered
        if fd.offers_fast_math(name):
            add(name, fd.variants(name)[0][0], True, {"fast_math": True}, fd.shapes(name)[0],
                "fast_math")
    for name in sorted(fd.BUNDLED_LONG):  # issue 17: the row slice kept in shared memory,
        for shape in fd.shapes(name):  # and each row split over independent CTAs
            # (smem_row is a knob of auto's walk, on by default; split's: no; the staged
            # walk here copies with plain loads and stores, async_stage has its own cases)
            for knobs in ({"smem_row": False}, {"smem_row": True, "async_stage": False}):
                add(name, "auto", True, knobs, shape, "smem_row")
            add(name, "split", True, {}, shape, "split")
            add(name, "resident", True, {"async_stage": False}, shape, "resident")
        for strategy, knobs in (("auto", {"smem_row": True}), ("split", {}), ("resident", {})):
            add(name, strategy, True, {**knobs, "async_stage": False, "l2_hints": True},
                fd.shapes(name)[0], "l2_hints")
        for strategy, knobs in (("auto", {"smem_row": True}), ("resident", {})):
            add(name, strategy, True, {**knobs, "async_stage": True}, fd.shapes(name)[0],
                "async_stage")
        if "l2_batch" in family_knobs(fd.plan_of(name))[0]:  # the split's launches 32 MiB of rows at a time
            add(name, "split", True, {"l2_batch": True}, fd.shapes(name)[0], "l2_batch")
    for name in _KNOB_TASKS:
        code = fd.rendered(name)
        main = fd.shapes(name)[0]
        for t in parse_tunables(code).values():
            for value in t.choices:
                if value != t.value and t.name != "strategy":
                    add(name, t.value if False else fd.variants(name)[0][0], True,
                        {t.name: value}, main, "knob")
    return cases


CASES = _build_cases()


def _case_id(c: dict) -> str:
    knobs = ",".join(f"{k}={v}" for k, v in c["knobs"].items())
    how = c["strategy"] + ("" if c["fused"] else "-unfused") + (f"-{knobs}" if knobs else "")
    return f"{c['name']}-{how}-{c['shape']['label']}"


@cache
def _results(root: str) -> list[dict]:
    """Write every candidate file, compile all cases in two children; results in case order."""
    return fd.compile_rendered(Path(root), CASES, [
        (key, partial(fd.rendered, *key), c["shape"]) for c in CASES
        for key in [(c["name"], c["strategy"], c["fused"], tuple(sorted(c["knobs"].items())))]])

@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    return _results(str(tmp_path_factory.mktemp("family_compile")))


def _n_cols(c: dict) -> tuple[int, int]:
    """(elements per row, bytes per element) of the task's main operand in this case."""
    plan = fd.plan_of(c["name"])
    lf = plan.leaf(plan.main)
    arg = plan.forward_args.index(lf.ref) if lf.source == "input" else 0
    shape = c["shape"]["inputs"][arg]["shape"]
    n = 1
    for d in shape[len(shape) - plan.param("k", 1):]:
        n *= d
    if plan.op == "group_norm":  # rows are (sample, group)
        n = math.prod(shape[1:]) // plan.param("groups")
    return n, _ESIZE[lf.dtype]


#: Bytes of a row a cluster of 8 CTAs can stage in shared memory (``smem_row``).
_STAGED_ROW_BYTES = 8 * 226 * 1024


def _staged(c: dict) -> bool:
    """Whether this long-row case's row fits a cluster's shared memory (``smem_row``)."""
    n, esize = _n_cols(c)
    return n * esize <= _STAGED_ROW_BYTES


def _has_tables(c: dict) -> bool:
    """Whether the op's output pass also loads per-column or per-channel operands (the
    norms' weight and bias)."""
    return fd.plan_of(c["name"]).op in ("layer_norm", "group_norm")


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_compiles_without_spills_and_vectorized(index, compiled):
    c, res = CASES[index], compiled[index]
    assert res["error"] is None, res["error"]
    kernels = [k for comp in res["compiles"] for k in comp["kernels"].values()]
    assert kernels, "forward compiled no kernel"
    for k in kernels:
        local = [op for op in k["ops"] if op.startswith(("LDL", "STL"))]
        assert not local and k.get("frame", 0) == 0, f"local memory: {k}"
        assert k.get("regs", 0) > 0
    n, esize = _n_cols(c)
    plan = fd.plan_of(c["name"])
    if c["knobs"].get("vec_bits", 128) == 128 and (n * esize) % 16 == 0:
        # (an evict-first access, l2_hints, is as wide: LDG.E.EF.128; so is a cp.async of
        # 16 bytes, async_stage: LDGSTS.E.BYPASS.LTC128B.128)
        ops = {"LDG.E.128" if op.startswith("LDGSTS") and op.endswith(".128")
               else op.replace(".EF", "") for k in kernels for op in k["ops"]}
        assert "LDG.E.128" in ops, ops
        assert not ops & {"LDG.E.U16", "LDG.E.U8", "LDG.E.S16"}, ops
        writes_rows = plan.family != "row" or plan.op in ("softmax", "log_softmax",
                                                          "layer_norm", "rms_norm")
        if writes_rows:
            assert "STG.E.128" in ops, ops


_SMEM_ROW = [i for i, c in enumerate(CASES)
             if c["group"] == "smem_row" and c["knobs"]["smem_row"]]
_SPLIT = [i for i, c in enumerate(CASES) if c["group"] in ("split", "l2_batch")]
_RESIDENT = [i for i, c in enumerate(CASES) if c["group"] == "resident"]


def _twin(index: int) -> int:
    """The case compiled the same way but without smem_row."""
    c = CASES[index]
    return next(i for i, d in enumerate(CASES) if d["group"] == "smem_row"
                and not d["knobs"]["smem_row"]
                and d["name"] == c["name"] and d["shape"] == c["shape"])


@pytest.mark.parametrize("index", _SMEM_ROW, ids=[_case_id(CASES[i]) for i in _SMEM_ROW])
def test_smem_row_reads_x_once(index, compiled):
    """With TUNABLES["smem_row"], a chunked row keeps its slice in shared memory: the output
    pass loads from shared memory (LDS) what the statistics pass stored (STS), so the kernel
    has half the global loads of the same kernel without it. Where the slice does not fit
    (16 rows of 4M values) or the row is not chunked, the kernel is unchanged."""
    res, base = compiled[index], compiled[_twin(index)]
    assert res["error"] is None and base["error"] is None, res["error"] or base["error"]

    def ops(r):
        out: dict = {}
        for comp in r["compiles"]:
            for k in comp["kernels"].values():
                for op, n in k["ops"].items():
                    out[op] = out.get(op, 0) + n
        return out

    got, was = ops(res), ops(base)
    ldg = lambda o: sum(n for op, n in o.items() if op.startswith("LDG"))  # noqa: E731
    sts = sum(n for op, n in got.items() if op.startswith("STS"))
    c = CASES[index]
    if not _staged(c):
        assert got == was  # 4M values a row, or 8 MiB groups: nothing is staged
    else:
        assert sts > 0 and ldg(got) < ldg(was), (got, was)
        if not _has_tables(c):  # (a norm's output pass also loads weight and bias)
            assert 2 * ldg(got) == ldg(was), (got, was)


@pytest.mark.parametrize("index", _SPLIT, ids=[_case_id(CASES[i]) for i in _SPLIT])
def test_split_rows_run_two_launches(index, compiled):
    """The split strategy compiles two kernels of the op (the statistics launch, the output
    launch, which takes the workspace as one more pointer), each without local memory; the
    output launch alone writes rows (its 128-bit stores where the row length allows)."""
    res = compiled[index]
    assert res["error"] is None, res["error"]
    kernels = {name: k for comp in res["compiles"] for name, k in comp["kernels"].items()}
    assert len(kernels) == 2, list(kernels)
    stats, out = sorted(kernels.items(), key=lambda kv: len(kv[0]))
    n, esize = _n_cols(CASES[index])
    if (n * esize) % 16 == 0:
        assert "STG.E.128" in out[1]["ops"] and "STG.E.128" not in stats[1]["ops"], kernels


_HINTED = [i for i, c in enumerate(CASES) if c["group"] == "l2_hints"]


@pytest.mark.parametrize("index", _HINTED, ids=[_case_id(CASES[i]) for i in _HINTED])
def test_l2_hints_stream_the_output_and_x_last_read(index, compiled):
    """With TUNABLES["l2_hints"], every 128-bit store of the output is evict-first
    (STG.E.EF.128), and x's loads are where x is read from global memory for the last time
    (resident and smem_row: staged in shared memory; split: the output launch; a two-pass
    walk that stages nothing: its output pass); the same case without hints has no
    evict-first access at all."""
    res = compiled[index]
    c = CASES[index]
    base = next(i for i, d in enumerate(CASES) if d["group"] in ("smem_row", "split", "resident")
                and d["name"] == c["name"] and d["shape"] == c["shape"]
                and d["strategy"] == c["strategy"]
                and d["knobs"].get("smem_row") == c["knobs"].get("smem_row"))
    assert res["error"] is None and compiled[base]["error"] is None
    kernels = {name: k["ops"] for comp in res["compiles"] for name, k in comp["kernels"].items()}
    plain = [k["ops"] for comp in compiled[base]["compiles"] for k in comp["kernels"].values()]
    assert not any(".EF" in op for ops in plain for op in ops), plain
    writer = max(kernels.items(), key=lambda kv: len(kv[0]))[1]  # split: the output launch
    assert "STG.E.EF.128" in writer and "STG.E.128" not in writer, writer
    assert "LDG.E.EF.128" in writer, writer


_ASYNC = [i for i, c in enumerate(CASES) if c["group"] == "async_stage"]


@pytest.mark.parametrize("index", _ASYNC, ids=[_case_id(CASES[i]) for i in _ASYNC])
def test_async_stage_copies_the_slice_with_cp_async(index, compiled):
    """With TUNABLES["async_stage"], a staged slice (smem_row where it fits, resident) is
    copied in with cp.async (LDGSTS, 128-bit) and read back from shared memory: the kernel
    loads x from global memory with nothing else (softmax has no other operand: no LDG at
    all). Where the slice is not staged (4M values a row, auto), the knob changes nothing."""
    res, c = compiled[index], CASES[index]
    assert res["error"] is None, res["error"]
    ops: dict = {}
    for comp in res["compiles"]:
        for k in comp["kernels"].values():
            for op, n in k["ops"].items():
                ops[op] = ops.get(op, 0) + n
    staged = c["strategy"] == "resident" or _staged(c)
    async_ops = [op for op in ops if op.startswith("LDGSTS")]
    if not staged:
        assert not async_ops, ops
        return
    assert async_ops and all(op.endswith(".128") for op in async_ops), ops
    if not _has_tables(c):  # (a norm's weight and bias are still loaded)
        assert not [op for op in ops if op.startswith("LDG.")
                    and "STRONG" not in op], ops  # (the resident barrier's loads are strong)


def _uses_tanh(name: str) -> bool:
    plan = fd.plan_of(name)
    return any(n.op in ("tanh", "mish") or (n.op == "gelu" and n.param("approximate") == "tanh")
               for c in (plan.prologue, plan.epilogue) for n in c.nodes)


_TANH_CASES = [i for i, c in enumerate(CASES) if c["name"] in fd.covered_task_names()
               and _uses_tanh(c["name"]) and c["group"] in ("default", "fast_math")
               and c["shape"] == fd.shapes(c["name"])[0]]


def test_some_task_exercises_the_fast_tanh():
    assert any(CASES[i]["group"] == "fast_math" for i in _TANH_CASES)


@pytest.mark.parametrize("index", _TANH_CASES, ids=[_case_id(CASES[i]) for i in _TANH_CASES])
def test_fast_math_turns_tanh_into_the_hardware_approximation(index, compiled):
    """TUNABLES["fast_math"] is what decides MUFU.TANH (tanh.approx.f32): present with it on,
    absent from the accurate default."""
    c, res = CASES[index], compiled[index]
    assert res["error"] is None, res["error"]
    mufu = {op for comp in res["compiles"] for k in comp["kernels"].values() for op in k["mma"]
            if op.startswith("MUFU")}
    if c["knobs"].get("fast_math"):
        assert "MUFU.TANH" in mufu, mufu
    else:
        assert "MUFU.TANH" not in mufu, mufu


@pytest.mark.parametrize("index", _RESIDENT, ids=[_case_id(CASES[i]) for i in _RESIDENT])
def test_resident_rows_read_x_once_in_one_launch(index, compiled):
    """The resident strategy compiles one kernel: the slice staged in shared memory by the
    statistics pass (with plain loads and stores here, async_stage off; its cp.async copy has
    cases of its own) and read back by the output pass, the row's CTAs meeting through a
    GPU-scope atomic and strong loads, no local memory; where the op reads nothing but x
    (softmax, log-softmax), every 128-bit global load of x is staged once and read back once
    (x read once, where the split strategy's two launches read it twice)."""
    res = compiled[index]
    assert res["error"] is None, res["error"]
    kernels = [k for comp in res["compiles"] for k in comp["kernels"].values()]
    assert len(kernels) == 1, len(kernels)
    ops = kernels[0]["ops"]
    assert any(op.startswith("STS") for op in ops) and any(op.startswith("LDS") for op in ops)
    assert any(op.startswith("ATOMG.E.ADD") and "STRONG.GPU" in op for op in ops), ops
    c = CASES[index]
    n, esize = _n_cols(c)
    if not _has_tables(c) and (n * esize) % 16 == 0:  # (a norm's output pass also loads
        # weight and bias)
        assert ops["LDG.E.128"] == ops["STS.128"] == ops["LDS.128"], ops


_SCANS = [i for i, c in enumerate(CASES) if c["group"] == "default"
          and fd.plan_of(c["name"]).family == "scan"]


@pytest.mark.parametrize("index", _SCANS, ids=[_case_id(CASES[i]) for i in _SCANS])
def test_products_are_scanned_in_float64_sums_in_float32(index, compiled):
    """A cumprod's parts (a vector's product, the lanes and warps before a thread) are
    multiplied in float64: in fp32 a part could overflow where the row's product up to
    there does not (a cumprod of randn + 3 past a small first factor; 12 +Inf outputs of 1G
    on the H100 at KernelBench level 1 problem 90's size, where the task's own fp32 cumprod
    and the float64 truth are finite). A cumsum keeps fp32 (no float64 arithmetic)."""
    c, res = CASES[index], compiled[index]
    assert res["error"] is None, res["error"]
    doubles = {op for comp in res["compiles"] for k in comp["kernels"].values()
               for op in k["mma"] if op in ("DMUL", "DADD", "DFMA")}
    if fd.plan_of(c["name"]).op == "cumprod":
        assert "DMUL" in doubles, res["compiles"]
    else:
        assert not doubles, doubles


def test_some_cumprod_is_compiled():
    assert any(fd.plan_of(CASES[i]["name"]).op == "cumprod" for i in _SCANS)
