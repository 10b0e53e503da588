"""Where a built-in candidate's time goes, host against GPU (needs a GPU): a development probe.

    python tools/host_overhead.py TASK [TASK ...] [--calls N] [--profile] [--json F]

For each bundled TASK the built-in family's first candidate is rendered, imported **into
this process** (a development tool, never the search: the evaluator runs candidates in a
worker it can kill) and called at the task's shape after three warm-up calls:

* ``host_us``: Python time per call, ``--calls`` calls issued back to back with no sync;
* ``span_us``: CUDA-event time per call over the same back-to-back calls: the GPU's wall,
  gaps included (equal to host_us when the host is the bottleneck);
* ``graph_us``: one call captured in a CUDA graph and replayed: the kernels alone, no host
  gaps (``-`` when the call cannot be captured);
* ``eager_us``: the task's own Model the same way (``span``), for scale;
* ``host_unreplayed_us`` / ``span_unreplayed_us``: host_us and span_us with the candidate's
  replays off (``REPLAY = False``: every call runs its launch code as written).

``--profile`` prints the top of a cProfile of the calls of each task (where the host time
goes: our launch code, the DSL's argument marshalling, torch allocations). ``--kernels``
prints each kernel's GPU time per call (torch.profiler), to say which launch of a call is
slow, then the host time of each CUDA runtime call (a blocking allocation or sync shows there). ``--set KEY=VALUE`` (repeatable) overrides one of the candidate's TUNABLES before its
first call, to compare knob settings side by side on one machine; an upper-case KEY sets one of
the candidate's module switches instead (``--set KEEP_PACKED=False``: a GEMM packs its
parameter operands on every call, as before they were kept).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _span_us(fn, calls: int) -> tuple[float, float]:
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    host = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return host, start.elapsed_time(end) * 1e3 / calls


def _graph_us(fn, calls: int) -> float | None:
    import torch

    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            fn()
        g.replay()
        torch.cuda.synchronize()
        return _span_us(g.replay, calls)[1]
    except Exception as exc:  # noqa: BLE001 - a probe: say why and go on
        print(f"  (no graph: {type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
        return None


def _kernel_us(fn, calls: int) -> list[tuple[str, float]]:
    """(name, µs per call) for each kernel the calls launch (GPU time), then for each CUDA
    runtime / driver call they make (host time: a launch, an allocation or a synchronisation
    that blocks shows here), slowest first within each."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels, api = [], []
    for ev in prof.key_averages():
        if not ev.count:
            continue
        device = getattr(ev, "device_time_total", None)
        if device is None:
            device = getattr(ev, "cuda_time_total", 0.0)
        if device > 0:
            kernels.append((ev.key, device / calls))
        elif ev.key.startswith(("cuda", "cu", "aten::empty")) and ev.cpu_time_total > 0:
            api.append((f"[host] {ev.key} x{ev.count / calls:g}", ev.cpu_time_total / calls))
    return sorted(kernels, key=lambda r: -r[1]) + sorted(api, key=lambda r: -r[1])


def _parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(val)
        except json.JSONDecodeError:
            out[key] = val
    return out


def probe(task_name: str, calls: int, profile: bool, tmp: Path, kernels: bool = False,
          sets: dict | None = None, algo: str = "") -> dict:
    import torch

    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_bundled_task, load_task_file

    if task_name.endswith(".py"):  # a task file of one's own (a KernelBench checkout's)
        task = load_task_file(task_name, name=Path(task_name).stem)
        task_name = Path(task_name).stem
    else:
        task = load_bundled_task(task_name)
    props = family_proposals(task)
    if algo:  # the first candidate on that conv kernel (direct / implicit_gemm)
        props = [p for p in props
                 if ("class DirectConvKernel" in p.candidate.code) == (algo == "direct")]
    if not props:
        return {"task": task_name, "error": "no built-in candidate"}
    cand_path = tmp / f"{task_name}_cand.py"
    cand_path.write_text(props[0].candidate.code)
    tmod = _load(f"task_{task_name}", Path(task.path))
    cmod = _load(f"cand_{task_name}", cand_path)
    for key, val in (sets or {}).items():
        if key.isupper() and isinstance(getattr(cmod, key, None), bool):
            on = val if isinstance(val, bool) else str(val).lower() in ("1", "true")
            setattr(cmod, key, on)  # a module switch (KEEP_PACKED, REPLAY)
            continue
        if key not in cmod.TUNABLES:
            raise KeyError(f"{key} is not one of the candidate's TUNABLES ({sorted(cmod.TUNABLES)})")
        cmod.TUNABLES[key] = val
    torch.manual_seed(0)
    ref = tmod.Model(*tmod.get_init_inputs()).cuda()
    torch.manual_seed(0)
    new = cmod.ModelNew(*tmod.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in tmod.get_inputs()]
    with torch.no_grad():
        err = (new(*inputs).float() - ref(*inputs).float()).abs().max().item()
        for _ in range(3):
            new(*inputs)
        host, span = _span_us(lambda: new(*inputs), calls)
        plain = (None, None)
        if getattr(cmod, "REPLAY", None) is True:  # the same calls, each run as written
            cmod.REPLAY = False
            plain = _span_us(lambda: new(*inputs), calls)
            cmod.REPLAY = True
        graph = _graph_us(lambda: new(*inputs), calls)
        _, eager = _span_us(lambda: ref(*inputs), calls)
        row = {"task": task_name, "host_us": host, "span_us": span, "graph_us": graph,
               "host_unreplayed_us": plain[0], "span_unreplayed_us": plain[1],
               "eager_us": eager, "max_abs_err": err, "set": sets or {}}
        if kernels:
            row["kernels"] = _kernel_us(lambda: new(*inputs), calls)
        if profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(calls):
                new(*inputs)
            prof.disable()
            torch.cuda.synchronize()
            buf = io.StringIO()
            stats = pstats.Stats(prof, stream=buf)
            stats.sort_stats("tottime").print_stats(20)
            stats.sort_stats("cumulative").print_stats(25)
            row["profile"] = buf.getvalue()
    return row


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", help="bundled task names or task files (.py)")
    ap.add_argument("--algo", choices=["direct", "implicit_gemm"], default="",
                    help="a conv task's first candidate on this kernel (default: the first)")
    ap.add_argument("--calls", type=int, default=100, help="calls per measurement")
    ap.add_argument("--profile", action="store_true", help="print a cProfile per task")
    ap.add_argument("--kernels", action="store_true",
                    help="print each kernel's GPU µs per call, and each CUDA API call's host µs")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override one of the candidate's TUNABLES (repeatable)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    sets = _parse_sets(args.set)
    import torch

    if not torch.cuda.is_available():
        print("host_overhead.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    print("| task | host µs/call | GPU span µs/call | unreplayed host / span µs | graph µs (kernels) "
          "| eager µs | max abs err |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks:
            try:
                row = probe(name, args.calls, args.profile, Path(tmp), args.kernels, sets,
                            args.algo)
            except Exception as exc:  # noqa: BLE001 - one task's failure is its row
                row = {"task": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            rows.append(row)
            if "error" in row:
                print(f"| {name} | error: {row['error']} ||||||", flush=True)
                continue
            print(f"| {name} | {_fmt(row['host_us'])} | {_fmt(row['span_us'])} | "
                  f"{_fmt(row['host_unreplayed_us'])} / {_fmt(row['span_unreplayed_us'])} | "
                  f"{_fmt(row['graph_us'])} | {_fmt(row['eager_us'])} | "
                  f"{row['max_abs_err']:.3g} |", flush=True)
    for row in rows:
        for kname, us in row.get("kernels", []):
            print(f"  {row['task']}: {us:9.1f} us  {kname[:110]}")
    for row in rows:
        if row.get("profile"):
            print(f"\n## {row['task']}\n{row['profile']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
