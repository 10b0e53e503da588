"""Theoretical occupancy from per-kernel resources (pure; the CUDA occupancy rules).

Blocks per SM are limited by registers (allocated per warp in units of 256), shared
memory (per block, plus 1 KB the system reserves per block on sm_80 and later, in 128-byte
units), resident threads (warps) and resident blocks. The smallest limit wins. This is an
estimate: ncu's ``launch__occupancy_limit_*`` metrics are the measured truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SMLimits:
    """Per-SM resource limits of one architecture."""

    name: str
    regs_per_sm: int
    max_regs_per_thread: int
    reg_alloc_unit: int  # registers, per warp
    smem_per_sm: int
    max_smem_per_block: int
    reserved_smem_per_block: int
    smem_alloc_unit: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    warp_size: int = 32

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


#: Hopper (sm_90 / sm_90a): 64K registers, 228 KB shared memory (227 KB per block),
#: 2048 threads and 32 blocks per SM.
SM90 = SMLimits(
    name="sm_90",
    regs_per_sm=65536,
    max_regs_per_thread=255,
    reg_alloc_unit=256,
    smem_per_sm=228 * 1024,
    max_smem_per_block=227 * 1024,
    reserved_smem_per_block=1024,
    smem_alloc_unit=128,
    max_threads_per_sm=2048,
    max_threads_per_block=1024,
    max_blocks_per_sm=32,
)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Resident blocks and warps per SM for one kernel launch configuration.

    Attributes:
        blocks_per_sm: resident blocks (0 when the configuration cannot launch).
        warps_per_sm: resident warps.
        fraction: resident warps / the SM's maximum.
        limiter: "registers", "shared_memory", "threads", "blocks", or "launch" when a
            per-block limit is exceeded and the kernel cannot launch at all.
    """

    blocks_per_sm: int
    warps_per_sm: int
    fraction: float
    limiter: str


def estimate_occupancy(
    *,
    regs_per_thread: int,
    threads_per_block: int,
    smem_per_block: int = 0,
    limits: SMLimits = SM90,
) -> Occupancy:
    """Theoretical occupancy of a kernel.

    Args:
        regs_per_thread: registers per thread (from the cubin).
        threads_per_block: block size.
        smem_per_block: static + dynamic shared memory per block, in bytes.
        limits: the architecture's limits.

    Returns:
        The :class:`Occupancy`.

    Raises:
        ValueError: for a non-positive block size or negative resources.
    """
    if threads_per_block <= 0 or regs_per_thread < 0 or smem_per_block < 0:
        raise ValueError("threads_per_block must be positive and resources non-negative")
    if (threads_per_block > limits.max_threads_per_block
            or regs_per_thread > limits.max_regs_per_thread
            or smem_per_block > limits.max_smem_per_block):
        return Occupancy(0, 0, 0.0, "launch")
    warps_per_block = math.ceil(threads_per_block / limits.warp_size)
    regs_per_warp = _round_up(max(regs_per_thread, 1) * limits.warp_size, limits.reg_alloc_unit)
    by_regs = (limits.regs_per_sm // regs_per_warp) // warps_per_block
    smem = _round_up(smem_per_block + limits.reserved_smem_per_block, limits.smem_alloc_unit)
    by_smem = limits.smem_per_sm // smem
    by_threads = limits.max_warps_per_sm // warps_per_block
    candidates = {
        "registers": by_regs,
        "shared_memory": by_smem,
        "threads": by_threads,
        "blocks": limits.max_blocks_per_sm,
    }
    limiter = min(candidates, key=lambda k: (candidates[k], _PRIORITY[k]))
    blocks = candidates[limiter]
    warps = blocks * warps_per_block
    return Occupancy(blocks, warps, warps / limits.max_warps_per_sm, limiter)


# When limits tie, name the one a person can act on first.
_PRIORITY = {"registers": 0, "shared_memory": 1, "threads": 2, "blocks": 3}


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit
