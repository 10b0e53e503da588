"""A mixed (LLM + built-in) search against a scripted OpenAI-compatible server, end to end.

    python tools/llm_demo.py [--compile-only] [--max-dollars 12] [--out DIR]

Run from a checkout. The loopback server (:mod:`cutegen._loopback_llm`) replays a scripted
session through the real ``openai`` client: for each LLM turn a correct CuTe DSL kernel for
``tests/data/tasks/scale_shift.py`` (a variant of the harness's own test kernel), then a
broken one (a DSL call that does not exist, so it fails to compile and triggers a repair
turn), then the repair. ``cutegen search --rewriter mixed`` runs as a child process with a
price of $1000 per million tokens, so the dollar cap ends the run after a few calls. The
script then prints, from the store, every LLM call (purpose, tokens, cost, outcome), every
node (move, verdict, time) and what was spent against the cap.

Without ``--compile-only`` the candidates are verified and timed on the GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tests" / "data" / "tasks" / "scale_shift.py"


def _render(**twist: str) -> str:
    """The evaluator tests' kernel template (a correct 2x+1 kernel unless twisted)."""
    spec = importlib.util.spec_from_file_location("_fixtures",
                                                  ROOT / "tests" / "codegen_tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod.render(**twist)


def _script(turns: int) -> list:
    from cutegen._loopback_llm import fenced, reply

    broken = _render(kernel_store="tO[i] = cute.no_such_function(tX[i])")
    answers = []
    for i in range(turns):
        good = _render(kernel_extra=f"    # LLM variant {i}")
        answers += [reply(fenced(good, note=f"Variant {i}: same kernel, documented.")),
                    reply(fenced(broken, note="A faster store.")),
                    reply(fenced(good + f"\n# repaired {i}\n", note="Fixed the unknown call."))]
    return answers


def _report(db: Path, run: str) -> None:
    from cutegen.search.storage import SqliteStorage

    s = SqliteStorage(db)
    try:
        r = s.get_run(run)
        calls = s.get_llm_calls(r.id)
        print(f"\nLLM calls ({len(calls)}):")
        print(f"  {'#':>3} {'purpose':8} {'candidate':>9} {'in tok':>7} {'out tok':>7} {'$':>7} "
              f"{'latency':>8}  outcome")
        for i, c in enumerate(calls, 1):
            print(f"  {i:>3} {c.purpose or '-':8} {(c.candidate_sha256 or '-')[:9]:>9} "
                  f"{c.prompt_tokens:>7} {c.completion_tokens:>7} {c.cost_usd:>7.3f} "
                  f"{c.latency_s:>7.2f}s  {c.outcome}{(': ' + c.error[:60]) if c.error else ''}")
        print("\nnodes:")
        print(f"  {'id':>3} {'parent':>6} {'move':14} {'verdict':12} {'median us':>10}  message")
        for n in s.get_nodes(r.id):
            ev = s.get_evaluation(n.id) if n.state.is_finished() else None
            t = ev.timing.median_us if ev is not None and ev.timing else None
            print(f"  {n.id:>3} {n.parent_id if n.parent_id is not None else '-':>6} "
                  f"{n.move.kind:14} {ev.verdict.value if ev else n.state.value:12} "
                  f"{t if t is not None else float('nan'):>10.1f}  "
                  f"{(ev.message if ev else '')[:70]}")
        print(f"\nspent ${s.llm_spent_usd(r.id):.3f} of the cap")
    finally:
        s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="no GPU: only compile")
    ap.add_argument("--max-dollars", type=float, default=12.0)
    ap.add_argument("--max-evals", type=int, default=30)
    ap.add_argument("--turns", type=int, default=8, help="scripted LLM turns (3 answers each)")
    ap.add_argument("--out", default="", help="folder for the store (default: a temp dir)")
    args = ap.parse_args(argv)
    from cutegen._loopback_llm import LoopbackLLMServer

    out = Path(args.out or tempfile.mkdtemp(prefix="llm_demo_"))
    out.mkdir(parents=True, exist_ok=True)
    seed = out / "seed.py"
    seed.write_text(_render())
    db = out / "llm_demo.db"
    with LoopbackLLMServer() as srv:
        srv.push(*_script(args.turns))
        cmd = [sys.executable, "-m", "cutegen", "search", str(TASK), "--seed-candidate",
               str(seed), "--db", str(db), "--run", "llm-demo", "--max-evals",
               str(args.max_evals), "--rewriter", "mixed", "--model", "scripted",
               "--base-url", srv.base_url, "--price", "scripted=1000/1000", "--max-tokens",
               "2000", "--max-dollars", str(args.max_dollars)]
        if args.compile_only:
            cmd.append("--compile-only")
        print("$ " + " ".join(cmd), flush=True)
        env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "scripted")}
        rc = subprocess.run(cmd, env=env, check=False).returncode
    _report(db, "llm-demo")
    return rc


if __name__ == "__main__":
    sys.exit(main())
