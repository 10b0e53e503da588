"""The hand-written seeds compile for sm_90a without a GPU, with the SASS we expect.

For each seed in ``benchmarks/seeds/`` a child process (``seed_compile_driver.py``) calls
``ModelNew(*init)(*inputs)`` on CPU tensors with the DSL's compile wrapped to record the SASS
and launch nothing. The cases cover fp32 and bf16, the tasks' main and hidden shapes, rows
that are not 16-byte aligned, and the TUNABLES: the defaults on every shape, and each other
allowed value (one knob at a time) on a few shapes. For every compiled kernel we assert

* no local memory: no LDL/STL in the SASS and a zero stack frame;
* the global loads (and stores of the row-shaped outputs) have exactly the width the row
  length, the alignment and ``vec_bits`` allow: 128-bit when N * elem_bytes % 16 == 0.

The child's environment carries ``CUTE_DSL_ARCH=sm_90a`` and the dump settings; nothing
of the DSL is imported into the pytest process.
"""

import ast
import json
import os
import subprocess
import sys
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

from cutegen.codegen.candidate import parse_tunables, set_tunable

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "benchmarks" / "seeds"
DRIVER = Path(__file__).with_name("seed_compile_driver.py")

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")

_ESIZE = {"float32": 4, "bfloat16": 2}
#: SASS load/store opcode by access width in bits.
_LDG = {128: "LDG.E.128", 64: "LDG.E.64", 32: "LDG.E", 16: "LDG.E.U16"}
_STG = {128: "STG.E.128", 64: "STG.E.64", 32: "STG.E", 16: "STG.E.U16"}

# (rows, N, offset in elements). offset 1 makes every row start off 16-byte alignment.
_SHAPES = {
    "gelu_scale_bias": [(4, 8192, 0), (1, 8192, 0), (127, 1000, 0), (3, 100003, 0), (7, 1000, 1)],
    "softmax": [(4, 4096, 0), (1, 4096, 0), (127, 1000, 0), (64, 32768, 0), (3, 131072, 0),
                (127, 100000, 0), (8, 262144, 0), (5, 3, 0), (7, 1001, 1)],
    "sum_rows": [(32768, 8192, 0), (1, 8192, 0), (127, 1000, 0), (16, 262144, 0), (5, 3, 0),
                 (7, 1001, 1)],
}
#: The few shapes every non-default tunable value is compiled on.
_KNOB_SHAPES = {
    "gelu_scale_bias": [(4, 8192, 0), (127, 1000, 0)],
    "softmax": [(4, 4096, 0), (127, 1000, 0), (3, 131072, 0), (8, 262144, 0)],
    "sum_rows": [(32768, 8192, 0), (127, 1000, 0), (16, 262144, 0)],
}


def _vec_bits(n: int, offset: int, dtype: str, max_bits: int) -> int:
    """The access width the seeds pick: widest power of two dividing N and the alignment."""
    esize = _ESIZE[dtype]
    vec = max(1, max_bits // (8 * esize))
    while vec > 1 and (n % vec or (offset * esize) % (vec * esize)):
        vec //= 2
    return vec * esize * 8


def _cases(seed: str) -> list[dict]:
    tunables = parse_tunables((SEEDS / f"{seed}.py").read_text())
    variants = [({}, _SHAPES[seed])]
    for t in tunables.values():
        for value in t.choices:
            if value != t.value:
                variants.append(({t.name: value}, _KNOB_SHAPES[seed]))
    cases = []
    for knobs, shapes in variants:
        for dtype in ("float32", "bfloat16"):
            for rows, n, offset in shapes:
                cases.append({
                    "tunables": knobs,
                    "init": [n, 1.702] if seed == "gelu_scale_bias" else [],
                    "inputs": [{"shape": [rows, n], "dtype": dtype, "offset": offset}],
                    "tunable_values": {k: v.value for k, v in tunables.items()} | knobs,
                })
    return cases


@pytest.fixture(scope="session")
def dump_root(tmp_path_factory) -> Path:
    """Where the children dump PTX / cubin / SASS (pytest keeps the last few runs)."""
    return tmp_path_factory.mktemp("seed_sass")


@cache
def _compile_all(seed: str, root: Path) -> tuple[list[dict], list[dict]]:
    """Run the driver once per seed; returns (cases, results) in the same order."""
    cases = _cases(seed)
    dump = root / seed
    dump.mkdir(parents=True, exist_ok=True)
    cases_file = dump / "cases.json"
    cases_file.write_text(json.dumps(cases))
    env = dict(os.environ)
    env.update({
        "CUTE_DSL_ARCH": "sm_90a",
        "CUTE_DSL_KEEP": "ptx,cubin,sass",
        "CUTE_DSL_DUMP_DIR": str(dump),
        "CUTE_DSL_NO_CACHE": "1",
    })
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(SEEDS / f"{seed}.py"), str(cases_file)],
        capture_output=True, text=True, env=env, timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])["cases"]
    assert len(results) == len(cases)
    return cases, results


def _case_ids(seed: str) -> list[str]:
    ids = []
    for c in _cases(seed):
        spec = c["inputs"][0]
        knobs = ",".join(f"{k}={v}" for k, v in c["tunables"].items()) or "default"
        rows, n = spec["shape"]
        ids.append(f"{knobs}-{spec['dtype']}-{rows}x{n}" + ("-misaligned" if spec["offset"] else ""))
    return ids


def _check(seed: str, index: int, root: Path) -> None:
    cases, results = _compile_all(seed, root)
    case, res = cases[index], results[index]
    assert res["error"] is None, res["error"]
    assert res["compiles"], "forward compiled no kernel"
    spec = case["inputs"][0]
    rows, n = spec["shape"]
    bits = _vec_bits(n, spec["offset"], spec["dtype"], case["tunable_values"]["vec_bits"])
    want_ldg = {_LDG[bits]}
    if seed == "gelu_scale_bias":  # the fp32 bias is read in pieces of at most 128 bits
        want_ldg.add(_LDG[min(128, bits // (8 * _ESIZE[spec["dtype"]]) * 32)])
    for comp in res["compiles"]:
        for name, k in comp["kernels"].items():
            ops = k["ops"]
            local = [op for op in ops if op.startswith(("LDL", "STL"))]
            assert not local, f"{name}: local memory {ops}"
            assert k.get("frame", 0) == 0, f"{name}: stack frame {k.get('frame')} bytes"
            ldg = {op for op in ops if op.startswith("LDG")}
            assert ldg == want_ldg, f"{name}: loads {ops}, expected {sorted(want_ldg)}"
            if seed != "sum_rows":
                stg = {op for op in ops if op.startswith("STG")}
                assert stg == {_STG[bits]}, f"{name}: stores {ops}, expected {_STG[bits]}"


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_cases("gelu_scale_bias"))),
                         ids=_case_ids("gelu_scale_bias"))
def test_gelu_scale_bias_compiles(index: int, dump_root: Path) -> None:
    _check("gelu_scale_bias", index, dump_root)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_cases("softmax"))), ids=_case_ids("softmax"))
def test_softmax_compiles(index: int, dump_root: Path) -> None:
    _check("softmax", index, dump_root)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_cases("sum_rows"))), ids=_case_ids("sum_rows"))
def test_sum_rows_compiles(index: int, dump_root: Path) -> None:
    _check("sum_rows", index, dump_root)


@pytest.mark.parametrize("seed", sorted(_SHAPES))
def test_seed_is_a_valid_candidate_file(seed: str) -> None:
    """TUNABLES parse, every allowed value can be set, and the file keeps the contract."""
    source = (SEEDS / f"{seed}.py").read_text()
    tree = ast.parse(source)
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module != "__future__", "no `from __future__` in kernel files"
            assert not (node.module or "").startswith("cutegen")
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("cutegen") for a in node.names)
    tunables = parse_tunables(source)
    assert tunables and all(t.movable for t in tunables.values())
    for t in tunables.values():
        assert t.value in t.choices
        for value in t.choices:
            assert parse_tunables(set_tunable(source, t.name, value))[t.name].value == value
