"""The Nsight Compute metrics cutegen collects: the one list, grouped by stage-1 bottleneck.

Names are Nsight Compute (2023.x-2025.x, sm_90) metric names as the Profiling Guide and
the shipped sections use them: ``<unit>__<counter>.<rollup>[.<submetric>]``. Only
``dram__throughput.avg.pct_of_peak_sustained_elapsed`` has been read on our H200 so far;
``tests/profilers_tests/test_ncu.py::test_metric_names_exist_in_installed_ncu`` checks the
rest against ``ncu --query-metrics --chip gh100`` wherever ncu is installed, and the ncu
profiler drops names the installed ncu rejects and retries once.
"""

from __future__ import annotations

from dataclasses import dataclass

from cutegen.profilers._base import BottleneckKind


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: its ncu name, a short label for summaries, and its set."""

    name: str
    label: str
    group: str  # "common" | "memory" | "compute" | "latency" | "stall"


_M = Metric
METRICS: tuple[Metric, ...] = (
    # -- always: time, speed-of-light, launch configuration ------------------------------
    _M("gpu__time_duration.sum", "duration", "common"),
    _M("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput", "common"),
    _M("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
       "memory throughput", "common"),
    _M("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput", "common"),
    _M("launch__registers_per_thread", "registers/thread", "common"),
    _M("launch__block_size", "block size", "common"),
    _M("launch__grid_size", "grid size", "common"),
    # -- memory-bound: bytes, caches, access efficiency ------------------------------------
    _M("dram__bytes_read.sum", "DRAM bytes read", "memory"),
    _M("dram__bytes_write.sum", "DRAM bytes written", "memory"),
    _M("lts__t_sector_hit_rate.pct", "L2 hit rate", "memory"),
    _M("l1tex__t_sector_hit_rate.pct", "L1 hit rate", "memory"),
    _M("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput", "memory"),
    _M("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1 throughput", "memory"),
    _M("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "global load sectors", "memory"),
    _M("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "global load requests", "memory"),
    _M("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "global store sectors", "memory"),
    _M("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "global store requests", "memory"),
    _M("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
       "used bytes per fetched load sector", "memory"),
    _M("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smem load bank conflicts",
       "memory"),
    _M("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "smem store bank conflicts",
       "memory"),
    # -- compute-bound: pipes -------------------------------------------------------------
    _M("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe", "compute"),
    _M("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe", "compute"),
    _M("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "LSU pipe", "compute"),
    _M("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy", "compute"),
    _M("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "FFMA thread instructions",
       "compute"),
    # -- latency-bound: occupancy and its limiters -----------------------------------------
    _M("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "latency"),
    _M("sm__maximum_warps_per_active_cycle_pct", "theoretical occupancy", "latency"),
    _M("launch__occupancy_limit_registers", "block limit (registers)", "latency"),
    _M("launch__occupancy_limit_shared_mem", "block limit (shared memory)", "latency"),
    _M("launch__occupancy_limit_warps", "block limit (warps)", "latency"),
    _M("launch__occupancy_limit_blocks", "block limit (blocks)", "latency"),
    _M("launch__shared_mem_per_block_dynamic", "dynamic smem/block", "latency"),
    _M("launch__shared_mem_per_block_static", "static smem/block", "latency"),
    _M("launch__waves_per_multiprocessor", "waves per SM", "latency"),
    _M("smsp__average_warp_latency_per_inst_issued.ratio", "warp cycles per issued instruction",
       "latency"),
)

#: Warp stall reasons (``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``:
#: warps stalled for this reason per issue cycle) and what to do about each.
STALL_ADVICE: dict[str, str] = {
    "long_scoreboard": "warps wait on global/local memory: pipeline loads (TMA/cp.async), "
                       "prefetch, more bytes in flight per thread",
    "short_scoreboard": "warps wait on shared memory or special-function results: fewer bank "
                        "conflicts, fewer MUFU ops",
    "barrier": "warps wait at block barriers: fewer __syncthreads, warp-specialized pipelines",
    "membar": "warps wait on memory fences: drop or narrow fences",
    "mio_throttle": "the shared-memory instruction queue is full: wider smem accesses "
                    "(LDS.128, ldmatrix)",
    "lg_throttle": "the global-memory instruction queue is full: vectorize global accesses",
    "wait": "fixed-latency dependencies: more independent instructions between uses",
    "math_pipe_throttle": "a math pipe is saturated: move work to another pipe or tensor cores",
    "not_selected": "enough eligible warps: the scheduler is busy (good)",
    "no_instruction": "instruction cache misses: less unrolling / smaller code",
    "branch_resolving": "branch targets: less divergent control flow",
    "dispatch_stall": "the dispatcher stalled: pipeline conflicts",
    "sleeping": "warps sleep (nanosleep / yield): check spin-waits",
}
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALLS: tuple[Metric, ...] = tuple(
    _M(STALL_METRIC.format(r), f"stall {r.replace('_', ' ')}", "stall") for r in STALL_ADVICE
)

ALL_METRICS: tuple[Metric, ...] = METRICS + STALLS
LABELS: dict[str, str] = {m.name: m.label for m in ALL_METRICS}

_GROUPS = {
    BottleneckKind.MEMORY: ("common", "memory", "latency"),
    BottleneckKind.COMPUTE: ("common", "compute", "latency", "stall"),
    BottleneckKind.LATENCY: ("common", "memory", "latency", "stall"),
    BottleneckKind.UNKNOWN: ("common", "memory", "compute", "latency", "stall"),
}


def metrics_for(kind: BottleneckKind | None) -> tuple[str, ...]:
    """The metric names to collect for a stage-1 class (all of them when unknown)."""
    groups = _GROUPS[kind or BottleneckKind.UNKNOWN]
    return tuple(m.name for m in ALL_METRICS if m.group in groups)
