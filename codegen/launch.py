"""``python -m cutegen.codegen.launch JOB.json``: run a candidate for a profiler.

The profilers' view of a candidate (RELIABILITY.md: candidates only run in processes of
their own): this fresh process imports the candidate, builds its inputs at the task's main
shape from the specs the reference worker produced, compiles it with one untimed call, and
then runs the measured calls as :mod:`cutegen.profilers.protocol` describes (repeat count,
energy readings, a torch.profiler trace), bracketed by ``cudaProfilerStart/Stop`` so
``ncu``/``nsys`` can limit themselves to them. It prints one result line and exits.
The job file is written by :meth:`cutegen.codegen.eval.evaluator.LocalEvaluator.profile_target`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from typing import Any

from cutegen.codegen.inputs import ArgSpec, generate
from cutegen.profilers.protocol import (
    ENV_ENERGY,
    ENV_REPEAT,
    ENV_TORCH_PROFILE,
    ENV_WARMUP,
    LaunchResult,
    format_launch_result,
)

#: Folders (os.pathsep-separated) the candidate may not open: a profiler's report folder.
ENV_DENY = "CUTEGEN_LAUNCH_DENY"


def _energy_mj() -> float | None:
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        bus = torch.cuda.get_device_properties(torch.cuda.current_device()).pci_bus_id
        h = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode() if isinstance(bus, str) else bus)
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
    except Exception:  # noqa: BLE001 - energy is optional; the profiler samples NVML itself
        return None


def run(job: dict[str, Any]) -> LaunchResult:
    import cutlass.cute  # noqa: F401  (imported before the sandbox, as in the workers)
    import torch

    from cutegen.codegen.eval.sandbox import install_audit_hook

    torch.empty(1, device="cuda")
    # The candidate runs here too: the same audit hook as in the evaluator's workers; it may
    # write only in its own folder and never read what the profiler writes (ENV_DENY).
    deny = [d for d in os.environ.get(ENV_DENY, "").split(os.pathsep) if d]
    install_audit_hook(audit_fd=2, scratch=os.getcwd(), read_denied=deny)
    spec = importlib.util.spec_from_file_location("cutegen_profiled_candidate", job["candidate_path"])
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {job['candidate_path']}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(int(job["seed_init"]))
    model = mod.ModelNew(*job["init_args"]).to("cuda")
    model.load_state_dict(torch.load(job["state_path"], map_location="cuda", weights_only=True))
    specs = [ArgSpec.from_dict(s) for s in job["specs"]]
    # the inputs the evaluator times with (a task of probabilities: uniform, never randn)
    inputs = generate(specs, seed=int(job["seed"]), distribution=str(job.get("dist", "randn")),
                      device="cuda")
    warmup = max(1, int(os.environ.get(ENV_WARMUP, "0") or 0))
    repeat = max(1, int(os.environ.get(ENV_REPEAT, "1") or 1))
    trace = os.environ.get(ENV_TORCH_PROFILE)
    energy = os.environ.get(ENV_ENERGY) == "1"
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        torch.cuda.synchronize()
        prof = None
        if trace:
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            prof.__enter__()
        e0 = _energy_mj() if energy else None
        torch.cuda.profiler.start()
        t0 = time.monotonic_ns()
        for _ in range(repeat):
            model(*inputs)
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
        torch.cuda.profiler.stop()
        e1 = _energy_mj() if energy else None
        if prof is not None:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(trace)
    pair = (e0, e1) if e0 is not None and e1 is not None else None
    return LaunchResult(calls=repeat, warmup=warmup, t0_ns=t0, t1_ns=t1, energy_mj=pair,
                        device=torch.cuda.get_device_name(0))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m cutegen.codegen.launch JOB.json", file=sys.stderr)
        return 2
    with open(args[0]) as f:
        job = json.load(f)
    try:
        result = run(job)
    except Exception as e:  # noqa: BLE001 - the profiler reads the message and the exit code
        print(f"launch failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(format_launch_result(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
