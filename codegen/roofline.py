"""Speed-of-light of a task: minimal bytes and FLOPs over the machine's ceilings (pure).

Two uses, with different ceilings:

* the *roofline fraction* reported to people uses the ceilings measured on this machine
  (copy bandwidth, cuBLAS bf16 rate; PERFORMANCE.md protocol step 1), or the defaults
  below when none were measured;
* the *speed-of-light gate* (RELIABILITY.md C16) uses the datasheet bandwidth, which no
  kernel can beat: a time below the bytes it must move means the timing or the
  verification was fooled, and the candidate is marked ``suspicious``. FLOPs are left out
  of the gate (they count the reference's algorithm, see :func:`speed_of_light_us`); a
  time beyond them is beyond the measured roofline, which an external profiler confirms.
"""

from __future__ import annotations

from dataclasses import dataclass

from cutegen.codegen.evaluation import Roofline


@dataclass(frozen=True, slots=True)
class Ceilings:
    """Achievable (measured) or physical (datasheet) rates of one GPU."""

    bandwidth_gbs: float
    peak_tflops: float
    l2_bytes: int
    source: str


#: Measured on the project's H200 (PERFORMANCE.md: copy 4.1-4.3 TB/s, cuBLAS bf16 8192^3
#: 700-790 TFLOP/s). Used until a benchmark run measures them again.
H200_MEASURED = Ceilings(4300.0, 790.0, 60 * 2**20, "PERFORMANCE.md, H200, 2026-11")
#: NVIDIA H200 SXM datasheet: HBM3e 4.8 TB/s, dense bf16 989 TFLOP/s. Nothing is faster.
H200_DATASHEET = Ceilings(4800.0, 989.0, 60 * 2**20, "H200 datasheet")


def roofline(*, bytes_moved: int, flops: int, ceilings: Ceilings = H200_MEASURED) -> Roofline:
    """The roofline bound of a task from its minimal traffic and arithmetic."""
    t_mem = bytes_moved / (ceilings.bandwidth_gbs * 1e9) * 1e6
    t_cmp = flops / (ceilings.peak_tflops * 1e12) * 1e6
    return Roofline(
        bytes_moved=int(bytes_moved),
        flops=int(flops),
        bound_us=max(t_mem, t_cmp),
        kind="compute" if t_cmp > t_mem else "memory",
        bandwidth_gbs=ceilings.bandwidth_gbs,
        peak_tflops=ceilings.peak_tflops,
    )


def speed_of_light_us(*, input_bytes: int, output_bytes: int,
                      ceilings: Ceilings = H200_DATASHEET) -> float:
    """The least time any correct kernel can take with a cold L2 (the C16 gate).

    Inputs must come from device memory after the L2 flush; outputs may stay in the L2
    (write-back), so only the part of the output that cannot fit there is counted.

    Bytes only: the task's FLOPs are counted from the reference's own operations, which
    bound its algorithm, not every correct one (``torch.diag(A) @ B`` is a row scaling:
    KernelBench L1 12's honest kernel took 46.7 µs on an H100 against the 139 µs its
    4096³ product takes at the H200's datasheet peak, and was called ``suspicious``). A time
    beyond the FLOP roofline is beyond the *measured* roofline, which an external profiler
    must confirm (:func:`cutegen.codegen.eval.verdict.above_roofline`).
    """
    out_dram = max(0, output_bytes - ceilings.l2_bytes)
    return (input_bytes + out_dram) / (ceilings.bandwidth_gbs * 1e9) * 1e6
