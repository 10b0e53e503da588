"""Compile-only driver for rendered family candidates: run in a child process, prints JSON.

    python family_compile_driver.py CASES.json

CASES.json is a list of ``{"file": CANDIDATE.py, "init": [...], "inputs": [{"shape": [...],
"dtype": "bfloat16", "offset": 0}]}`` (an input ``{"value": 3.14}`` is a Python number). For each case the candidate is imported from its file
and ``ModelNew(*init)(*inputs)`` runs on CPU tensors with the DSL's compile wrapped as in
``tests/codegen_tests/seed_compile_driver.py`` (whose helpers this reuses): each compiled
kernel's register count, stack frame, SASS memory-op counts and math / TMA instruction counts
(``mma``: HGMMA.<shape>.<types>, HMMA, FFMA, UTMALDG, UTMASTG, MUFU.<fn>) are recorded and nothing is
launched. Output: ``{"cases": [{"error": str | None, "compiles": [...]}]}``.
"""

import importlib.util
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen_tests"))

import seed_compile_driver as seed  # noqa: E402


def main(argv: list[str]) -> int:
    cases = json.loads(Path(argv[1]).read_text())
    records: list = []
    seed._patch(records)
    results = []
    for i, case in enumerate(cases):
        start = len(records)
        error = None
        try:
            # a fresh import per case: the candidate's compile cache starts empty
            spec = importlib.util.spec_from_file_location(f"cand_{i}", case["file"])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            model = module.ModelNew(*case.get("init", []))
            inputs = [s["value"] if "value" in s else seed._make_input(s) for s in case["inputs"]]
            model(*inputs)
        except Exception:
            error = traceback.format_exc(limit=12)
        results.append({"error": error, "compiles": records[start:], "index": i})
    print(json.dumps({"cases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
