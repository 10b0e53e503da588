"""A stand-in for ``python -m cutegen.codegen.launch JOB.json`` that speaks the launcher
protocol (:mod:`cutegen.profilers.protocol`) around a CuTe DSL vectorized fp32 add.

Used by the ``gpu`` smoke tests of the profilers, and to record real ncu / nsys /
torch.profiler outputs on the GPU machine (see tests/data/profilers/README.md). It is a
reference for what the real launcher must do with the ``CUTEGEN_LAUNCH_*`` variables.

    python tests/profilers_tests/gpu_launcher.py [--vec 4] [--n 16777216] [--compile-only]

No ``from __future__ import annotations`` here: the DSL reads real annotations.
"""

import argparse
import contextlib
import os
import time

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

from cutegen.profilers import protocol


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, tv: cute.Layout):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tA = cute.composition(gA[(None, bidx)], tv)
    tB = cute.composition(gB[(None, bidx)], tv)
    tC = cute.composition(gC[(None, bidx)], tv)
    tC[(tidx, None)].store(tA[(tidx, None)].load() + tB[(tidx, None)].load())


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, vec: cutlass.Constexpr):
    threads = 128
    tv = cute.make_layout((threads, vec), stride=(vec, 1))
    tile = (threads * vec,)
    gA, gB, gC = (cute.zipped_divide(t, tile) for t in (mA, mB, mC))
    add_kernel(gA, gB, gC, tv).launch(grid=[cute.size(gC, mode=[1]), 1, 1], block=[threads, 1, 1])


def _energy_reader():
    """NVML total-energy counter (mJ) of the GPU this process runs on, by PCI bus id."""
    import pynvml

    pynvml.nvmlInit()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:
        bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    except Exception:  # older torch without pci ids: fall back to NVML index 0
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    return lambda: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vec", type=int, default=4)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    device = "cpu" if args.compile_only else "cuda"
    tensors = [torch.randn(args.n, device=device) for _ in range(2)] + [torch.empty(args.n, device=device)]
    cts = [from_dlpack(t, assumed_align=16).mark_compact_shape_dynamic(mode=0) for t in tensors]
    compiled = cute.compile(add, *cts, args.vec)
    if args.compile_only:
        print("compiled", list(compiled.kernel_info))
        return
    env = os.environ
    warmup = int(env.get(protocol.ENV_WARMUP, "0"))
    repeat = int(env.get(protocol.ENV_REPEAT, "1"))
    trace = env.get(protocol.ENV_TORCH_PROFILE)
    read = _energy_reader() if env.get(protocol.ENV_ENERGY) == "1" else None
    for _ in range(warmup):
        compiled(*cts)
    torch.cuda.synchronize()
    prof = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                               torch.profiler.ProfilerActivity.CUDA])
            if trace else contextlib.nullcontext())
    with prof:
        e0 = read() if read else None
        torch.cuda.profiler.start()
        t0 = time.monotonic_ns()
        for _ in range(repeat):
            compiled(*cts)
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
        torch.cuda.profiler.stop()
        e1 = read() if read else None
    if trace:
        prof.export_chrome_trace(trace)
    torch.testing.assert_close(tensors[2], tensors[0] + tensors[1])
    energy = (e0, e1) if e0 is not None and e1 is not None else None
    print(protocol.format_launch_result(protocol.LaunchResult(
        repeat, warmup, t0, t1, energy, torch.cuda.get_device_name())), flush=True)


if __name__ == "__main__":
    main()
