"""Compile-only driver for rendered GEMM candidates: run in a child process, prints JSON.

    python gemm_compile_driver.py CASES.json

Like ``family_compile_driver.py`` (CASES.json is a list of ``{"file", "init", "inputs"}``;
each candidate is imported and ``ModelNew(*init)(*inputs)`` runs on CPU tensors with the DSL's
compile recording instead of launching), but each kernel record also counts the SASS math
and TMA instructions the GEMM tests look at: ``HGMMA.<shape>.<types>``, ``HMMA``, ``FFMA``,
``UTMALDG``, ``UTMASTG``.
Output: ``{"cases": [{"error": str | None, "compiles": [{"kernels": {name: {"regs",
"frame", "ops", "mma"}}}]}]}``.
"""

import importlib.util
import json
import re
import sys
import time
import traceback
import types
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen_tests"))

import seed_compile_driver as seed  # noqa: E402

_MMA_RE = re.compile(r"\b(HGMMA\.[0-9A-Za-z.]+|HMMA\.[0-9A-Za-z.]+|FFMA|UTMALDG|UTMASTG)\b")


def mma_ops(sass: str) -> dict[str, Counter]:
    """Per kernel (one ``.text.<kernel>`` section each): counts of HGMMA / HMMA / FFMA."""
    per: dict[str, Counter] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"\s*\.section\s+\.text\.(\S+?),", line)
        if m:
            current = m.group(1)
            per.setdefault(current, Counter())
            continue
        if current is None or not re.match(r"\s*/\*[0-9a-f]+\*/", line):
            continue
        body = line.split("*/", 1)[1].split(";")[0]
        for m in _MMA_RE.finditer(body):
            per[current][m.group(1)] += 1
    return per


def _patch(records: list) -> None:
    import torch
    from cutlass.base_dsl.compiler import CompileCallable

    stream = types.SimpleNamespace(cuda_stream=0)
    torch.cuda.current_stream = lambda *a, **k: stream  # type: ignore[assignment]
    original = CompileCallable.__call__

    def compile_only(self, *args, **kwargs):
        t0 = time.perf_counter()
        compiled = original(self, *args, **kwargs)
        seconds = time.perf_counter() - t0
        arts = compiled.artifacts
        resources = seed.cubin_resources(arts.CUBIN) if arts.CUBIN else {}
        sass = arts.SASS or ""
        ops = seed.sass_ops(sass)
        mma = mma_ops(sass)
        kernels = {name: {**resources.get(name, {}), "ops": dict(ops.get(name, {})),
                          "mma": dict(mma.get(name, {}))}
                   for name in compiled.kernel_info}
        records.append({"seconds": round(seconds, 3), "kernels": kernels})
        return lambda *a, **k: None

    CompileCallable.__call__ = compile_only  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    cases = json.loads(Path(argv[1]).read_text())
    records: list = []
    _patch(records)
    results = []
    for i, case in enumerate(cases):
        start = len(records)
        error = None
        try:
            spec = importlib.util.spec_from_file_location(f"gemm_cand_{i}", case["file"])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            model = module.ModelNew(*case.get("init", []))
            inputs = [seed._make_input(s) for s in case["inputs"]]
            model(*inputs)
        except Exception:
            error = traceback.format_exc(limit=12)
        results.append({"error": error, "compiles": records[start:], "index": i})
    print(json.dumps({"cases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
