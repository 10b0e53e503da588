"""The way on for a task no built-in family covers, end to end: the built-in rewriter refuses
with the reason, then a mixed search gets its kernels from an LLM.

    python tools/llm_uncovered_demo.py [--compile-only] [--max-evals 12] [--out DIR]

The task (``tests/families_tests/negative/scale_shift_repeat.py``) computes 2x + 1 through
``Tensor.repeat``, an op no family covers. First ``cutegen search TASK`` with the built-in
rewriter: it must stop with "no built-in kernel family covers this task: Tensor.repeat ...;
use --rewriter llm or --rewriter mixed ..., or pass --seed-candidate FILE". Then ``cutegen
search TASK --rewriter mixed`` against the scripted loopback OpenAI-compatible server
(:mod:`cutegen._loopback_llm`, through the real ``openai`` client; the scripted answers are
``llm_demo.py``'s: a correct kernel, a broken one that gets a repair turn, the repair), with
no seed: every candidate comes from the LLM. The store's LLM calls and nodes are printed.
Needs ``openai`` and ``pydantic`` importable.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from llm_demo import _report, _script  # tools/llm_demo.py (this folder is sys.path[0])

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "families_tests" / "negative" / "scale_shift_repeat.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="no GPU: only compile")
    ap.add_argument("--max-evals", type=int, default=12)
    ap.add_argument("--turns", type=int, default=6, help="scripted LLM turns (3 answers each)")
    ap.add_argument("--out", default="", help="folder for the store (default: a temp dir)")
    args = ap.parse_args(argv)
    from cutegen._loopback_llm import LoopbackLLMServer

    out = Path(args.out or tempfile.mkdtemp(prefix="llm_uncovered_"))
    out.mkdir(parents=True, exist_ok=True)
    db = out / "llm_uncovered.db"
    extra = ["--compile-only"] if args.compile_only else []
    cmd = [sys.executable, "-m", "cutegen", "search", str(TASK), "--db", str(db), "--run",
           "builtin-only", "--max-evals", "2", *extra]
    print("$ " + " ".join(cmd), flush=True)
    refused = subprocess.run(cmd, capture_output=True, text=True, check=False)
    print(refused.stderr.strip() or refused.stdout.strip(), flush=True)
    if refused.returncode == 0 or "no built-in kernel family covers this task" not in (
            refused.stderr + refused.stdout):
        print("FAILED: the built-in rewriter did not refuse the task with its reason")
        return 1
    with LoopbackLLMServer() as srv:
        srv.push(*_script(args.turns))
        cmd = [sys.executable, "-m", "cutegen", "search", str(TASK), "--db", str(db), "--run",
               "mixed", "--max-evals", str(args.max_evals), "--rewriter", "mixed", "--model",
               "scripted", "--base-url", srv.base_url, "--price", "scripted=1/1",
               "--max-tokens", "2000", "--max-dollars", "5", *extra]
        print("$ " + " ".join(cmd), flush=True)
        env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "scripted")}
        rc = subprocess.run(cmd, env=env, check=False).returncode
    _report(db, "mixed")
    return rc


if __name__ == "__main__":
    sys.exit(main())
