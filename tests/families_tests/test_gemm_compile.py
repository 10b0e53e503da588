"""The gemm family compiles for sm_90a on the CPU with the SASS we design for: the product on
tensor cores (``HGMMA.64xNxK`` of the plan's precision, no ``HMMA``), TMA loads
(``UTMALDG``), no local memory (no LDL/STL, zero stack frame) in any kernel.

``test_rendered_file_declares_family_knobs_and_precision`` needs no DSL (rendering only).
Compile cases (run by ``gemm_compile_driver.py`` in two child processes at once, so nothing of the
DSL is imported here):

* the default candidate of every hand-built plan (``gemm_plans.py``: bf16 / fp16 / tf32 /
  3xtf32, A@B, A@B^T, A^T@B, bmm, bias + ReLU / GELU, scale + residual, logsumexp) on its
  main shape (sizes capped at 1024: the kernel takes M, N, K at run time, so only alignment
  classes matter) and on each VERIFY_SHAPE (M = 1, 127 x 1000 x 520, odd N and K: the pack
  and direct-store paths);
* every other allowed value of every knob, one knob at a time, on ``gemm_bf16`` and the
  precision / tile knobs on ``gemm_fp32``.
"""

import importlib.util
import json
import os
import subprocess
import sys
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest


def _gemm_plans():
    name = "_cutegen_gemm_plans"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name,
                                                      Path(__file__).with_name("gemm_plans.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


gp = _gemm_plans()
DRIVER = Path(__file__).with_name("gemm_compile_driver.py")
#: SASS type suffix of the HGMMA per precision (fp16 inputs carry none).
_MMA_TYPE = {"bf16": ".BF16", "fp16": "", "tf32": ".TF32", "3xtf32": ".TF32"}
_CAP = 1024



def _capped(shape: dict) -> dict:
    """The main shape with every size capped at _CAP (init args and tensor dims alike)."""
    out = json.loads(json.dumps(shape))
    out["init"] = [min(v, _CAP) if isinstance(v, int) else v for v in out["init"]]
    for t in out["inputs"]:
        t["shape"] = [min(d, _CAP) for d in t["shape"]]
    return out


def _build_cases() -> list[dict]:
    cases = []
    for name in gp.PLANS:
        for i, shape in enumerate(gp.shapes(name)):
            cases.append({"name": name, "knobs": {}, "shape": _capped(shape) if i == 0 else shape})
    for name, only in (("gemm_bf16", None), ("gemm_fp32", ("tile_m", "tile_n", "tile_k",
                                                         "precision", "epilogue"))):
        values, choices = gp.gemm_knobs_of(name)
        main = _capped(gp.shapes(name)[0])
        for knob, allowed in choices.items():
            if only and knob not in only:
                continue
            for v in allowed:
                if v != values[knob]:
                    cases.append({"name": name, "knobs": {knob: v}, "shape": main})
    return cases


CASES = _build_cases()


def _case_id(c: dict) -> str:
    knobs = "".join(f"-{k}={v}" for k, v in c["knobs"].items())
    return f"{c['name']}{knobs}-{c['shape']['label']}"


@cache
def _results(root: str) -> list[dict]:
    """Write every candidate file, compile all cases in two children; results in case order."""
    root_p = Path(root)
    files: dict[tuple, str] = {}
    jobs = []
    for i, c in enumerate(CASES):
        key = (c["name"], tuple(sorted(c["knobs"].items())))
        if key not in files:
            path = root_p / f"gemm_cand_{len(files)}.py"
            path.write_text(gp.rendered(c["name"], **c["knobs"]))
            files[key] = str(path)
        jobs.append({"file": files[key], "init": c["shape"]["init"],
                     "inputs": c["shape"]["inputs"], "index": i})
    halves = [jobs[0::2], jobs[1::2]]
    procs = []
    for k, half in enumerate(halves):
        cases_file = root_p / f"cases_{k}.json"
        cases_file.write_text(json.dumps(half))
        dump = root_p / f"dump_{k}"
        dump.mkdir(exist_ok=True)
        env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx,cubin,sass",
                   CUTE_DSL_DUMP_DIR=str(dump), CUTE_DSL_NO_CACHE="1")
        procs.append(subprocess.Popen([sys.executable, str(DRIVER), str(cases_file)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env))
    out: list[dict | None] = [None] * len(CASES)
    for half, proc in zip(halves, procs, strict=True):
        stdout, stderr = proc.communicate(timeout=1800)
        assert proc.returncode == 0, stderr[-4000:]
        results = json.loads(stdout.strip().splitlines()[-1])["cases"]
        for job, res in zip(half, results, strict=True):
            out[job["index"]] = res
    (root_p / "results.json").write_text(json.dumps({"cases": CASES, "results": out}))
    return out  # type: ignore[return-value]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    return _results(str(tmp_path_factory.mktemp("gemm_compile")))


@pytest.mark.parametrize("name", list(gp.PLANS))
def test_rendered_file_declares_family_knobs_and_precision(name):
    """Rendering needs no DSL: the file parses, passes the static checks, and its TUNABLES,
    TUNABLE_CHOICES, FAMILY and PRECISION are what the search reads."""
    from cutegen.codegen.candidate import declared_precision, parse_tunables
    from cutegen.codegen.static import check_source

    code = gp.rendered(name)
    assert check_source(code).ok
    values, choices = gp.gemm_knobs_of(name)
    tun = parse_tunables(code)
    assert {t.name: t.value for t in tun.values()} == values
    for t in tun.values():
        assert t.value in t.choices, t
    assert "FAMILY = {'family': 'gemm', 'op': 'matmul', 'fused': True}" in code
    assert declared_precision(code) == values["precision"]
    assert "class ModelNew(_TaskModule):" in code and "from cutegen" not in code
    if gp.plan(name).param("precision_default") in ("bf16", "fp16"):
        assert choices["precision"] == [values["precision"]]
    else:
        assert "3xtf32" in choices["precision"]


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
@pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")
@pytest.mark.slow
def test_gemm_compiles_to_hgmma_without_spills(index, compiled):
    c, res = CASES[index], compiled[index]
    assert res["error"] is None, res["error"]
    kernels = {name: k for comp in res["compiles"] for name, k in comp["kernels"].items()}
    gemm = [k for name, k in kernels.items() if "GemmKernel" in name]
    assert len(gemm) == 1, list(kernels)
    for name, k in kernels.items():
        local = [op for op in k["ops"] if op.startswith(("LDL", "STL"))]
        assert not local and k.get("frame", 0) == 0, f"local memory in {name}: {k}"
    values, _ = gp.gemm_knobs_of(c["name"])
    values.update(c["knobs"])
    mma = gemm[0]["mma"]
    hgmma = {op: n for op, n in mma.items() if op.startswith("HGMMA")}
    assert hgmma, f"no HGMMA in the GEMM kernel: {mma}"
    assert not any(op.startswith("HMMA") for op in mma), mma
    kdim = 8 if values["precision"] in ("tf32", "3xtf32") else 16
    want = f"HGMMA.64x{values['tile_n']}x{kdim}.F32{_MMA_TYPE[values['precision']]}"
    assert all(op == want or op.startswith(want + ".") for op in hgmma), (want, hgmma)
    if values["precision"] == "fp16":
        assert not any(t in op for op in hgmma for t in (".BF16", ".TF32")), hgmma
    if gp.plan(c["name"]).epilogue.empty:
        assert mma.get("FFMA", 0) == 0, f"FFMA in a GEMM without epilogue math: {mma}"
    assert mma.get("UTMALDG", 0) > 0, f"no TMA loads: {mma}"
    if values["epilogue"] == "tma" and "UTMASTG" not in mma:
        # only when the output's rows are not 16-byte aligned (odd N): direct stores
        assert any(op.startswith("STG") for op in gemm[0]["ops"]), gemm[0]["ops"]
