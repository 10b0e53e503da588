"""The machine's ceilings, measured (PERFORMANCE.md protocol step 1), in a process of its own.

* **Copy bandwidth** ``B_copy``: ``torch.clone`` of a bf16 tensor of at least 1 GB, bytes
  read + written over the median time.
* **GEMM peak** ``F_gemm``: cuBLAS bf16 ``torch.mm`` at 8192³, ``2·N³`` over the median time.

Both are timed by :class:`cutegen.codegen._timing.Timer`, the evaluator's own harness
(CUDA events, L2 flushed before every call, warm-up calls untimed), so a kernel's fraction
of the roofline compares like with like. :func:`measure_ceilings` runs
``python -m cutegen.codegen.ceilings`` in a child process, so the benchmark's own process
never holds a CUDA context while its searches run. The arithmetic is pure
(:func:`ceilings_from_samples`) and tested on CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cutegen.codegen.roofline import Ceilings
from cutegen.errors import InfrastructureError

METHOD = "cuda-events, L2 flushed per call (cutegen.codegen._timing.Timer), median"


@dataclass(frozen=True, slots=True)
class MeasuredCeilings:
    """Copy bandwidth and GEMM rate measured on this machine, with how.

    Attributes:
        copy_gbs: bytes read + written per second by ``torch.clone``, in GB/s.
        copy_bytes: size of the tensor cloned.
        copy_median_us / gemm_median_us: median times of one call.
        gemm_tflops: ``2 N³`` per second of bf16 ``torch.mm``, in TFLOP/s.
        gemm_n: N of the N×N×N product.
        runs: timed calls of each.
        gpu / clocks: the device and its clocks when measured (NVML, where available).
        method: how the calls were timed.
    """

    copy_gbs: float
    copy_bytes: int
    copy_median_us: float
    gemm_tflops: float
    gemm_n: int
    gemm_median_us: float
    runs: int
    gpu: str = ""
    clocks: Mapping[str, Any] = field(default_factory=dict)
    method: str = METHOD

    def ceilings(self) -> Ceilings:
        """As roofline ceilings (L2 size of an H200; only the speed-of-light gate uses it)."""
        return Ceilings(self.copy_gbs, self.gemm_tflops, 60 * 2**20,
                        f"measured by cutegen bench on {self.gpu or 'this GPU'}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["clocks"] = dict(self.clocks)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MeasuredCeilings:
        return MeasuredCeilings(**{k: d[k] for k in d if k in MeasuredCeilings.__slots__})


def ceilings_from_samples(*, copy_samples_us: Sequence[float], copy_bytes: int,
                          gemm_samples_us: Sequence[float], gemm_n: int, gpu: str = "",
                          clocks: Mapping[str, Any] | None = None) -> MeasuredCeilings:
    """The ceilings from raw per-call times (pure).

    Raises:
        ValueError: no samples, or a non-positive median.
    """
    if not copy_samples_us or not gemm_samples_us:
        raise ValueError("need samples of both the copy and the GEMM")
    t_copy = statistics.median(copy_samples_us)
    t_gemm = statistics.median(gemm_samples_us)
    if t_copy <= 0 or t_gemm <= 0:
        raise ValueError("median times must be positive")
    return MeasuredCeilings(
        copy_gbs=2 * copy_bytes / (t_copy * 1e-6) / 1e9, copy_bytes=int(copy_bytes),
        copy_median_us=t_copy, gemm_tflops=2 * gemm_n**3 / (t_gemm * 1e-6) / 1e12,
        gemm_n=int(gemm_n), gemm_median_us=t_gemm,
        runs=min(len(copy_samples_us), len(gemm_samples_us)), gpu=gpu, clocks=dict(clocks or {}))


def _clocks() -> dict[str, Any]:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "sm_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000}
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - clocks are informative only
        return {}


def measure_here(*, copy_gb: float = 1.0, gemm_n: int = 8192, runs: int = 100,
                 warmup: int = 3, flush_mb: int = 256) -> MeasuredCeilings:
    """Measure in this process (needs torch and a CUDA GPU); the child's entry point."""
    import torch

    from cutegen.codegen._timing import Timer

    timer = Timer(flush_mb=flush_mb)
    n_copy = int(copy_gb * 2**30) // 2
    x = torch.randn(n_copy, dtype=torch.bfloat16, device="cuda")
    copy = timer.time_calls(x.clone, warmup=warmup, runs=runs)
    del x
    a = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16, device="cuda")
    gemm = timer.time_calls(lambda: torch.mm(a, b), warmup=warmup, runs=runs)
    return ceilings_from_samples(copy_samples_us=copy, copy_bytes=n_copy * 2,
                                 gemm_samples_us=gemm, gemm_n=gemm_n,
                                 gpu=torch.cuda.get_device_name(0), clocks=_clocks())


def measure_ceilings(*, timeout_s: float = 600.0, gpu: int | None = None,
                     runs: int = 100) -> MeasuredCeilings:
    """Measure the ceilings in a child process.

    Raises:
        InfrastructureError: the child failed or timed out (no GPU, out of memory, ...).
    """
    import os

    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    with tempfile.TemporaryDirectory(prefix="cutegen-ceilings-") as tmp:
        out = Path(tmp) / "ceilings.json"
        try:
            p = subprocess.run([sys.executable, "-m", "cutegen.codegen.ceilings", "--out",
                                str(out), "--runs", str(runs)], env=env, cwd=tmp,
                               capture_output=True, text=True, timeout=timeout_s,
                               start_new_session=True)
        except subprocess.TimeoutExpired as e:
            raise InfrastructureError(f"measuring the ceilings took over {timeout_s:.0f} s") from e
        if p.returncode != 0 or not out.is_file():
            raise InfrastructureError("measuring the ceilings failed:\n"
                                      + (p.stderr or p.stdout)[-3000:])
        return MeasuredCeilings.from_dict(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args(argv)
    m = measure_here(runs=args.runs)
    Path(args.out).write_text(json.dumps(m.to_dict(), indent=2))


if __name__ == "__main__":
    main()
