"""GPU probe of the native observer: what does the parent see, kernel by kernel?

Run on the GPU machine from the repository root (cutegen installed, ``pip install -e .``):

    python3 tools/observer_probe.py --out DIR [--only a,b,...]

Each scenario starts a child Python process that imports torch, attaches the observer
(``cutegen.codegen.eval.observer.attach``) before running anything else, runs the scenario,
synchronises the device and waits; the parent then flushes the channel and prints what
arrived: one row per KERNEL / MEMCPY / MEMSET / API record (kind, name, stream, duration,
correlation id), every MODULE record's origin, chain and first kernel names, and the FLUSHED
counters (dropped records, records total, launch callbacks against driver launch API
records, health bits). A scenario that fails prints its traceback and the probe goes on.
Everything printed is also written to ``DIR/observer_probe.txt``.

Scenarios: (a) torch matmul + softmax; (b) a CuTe DSL kernel, y = 2x + 1; (c) a PTX kernel
through cuModuleLoadData + cuLaunchKernel; (d) torch.cuda._compile_kernel (NVRTC);
(e) a CUDA graph replay; (f) a kernel on a side stream; (g) lockdown, then os.fork() must
fail while the CuTe kernel still compiles and runs; (h) overhead: 2,000 tiny torch kernels
with and without the observer (and without API records), and one 256 MiB memset timed by
CUDA events and by its MEMSET record; (i) a torch.profiler session inside the child, to see
whether a candidate could blind the observer that way (health bits, launch-count gap).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

BUDGET_S = 170.0
CHILD_TIMEOUT_S = 75.0
MAX_ROWS = 40

# -- the child ---------------------------------------------------------------------------------

CUTE_SOURCE = '''\
import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def probe_scale_shift_kernel(gX: cute.Tensor, gO: cute.Tensor, cX: cute.Tensor,
                             shape: cute.Shape, tv: cute.Layout):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    blk = ((None, None), bidx)
    tX = cute.composition(gX[blk], tv)[(tidx, None)]
    tO = cute.composition(gO[blk], tv)[(tidx, None)]
    tC = cute.composition(cX[blk], tv)[(tidx, None)]
    for i in range(cute.size(tX)):
        if cute.elem_less(tC[i], shape):
            tO[i] = tX[i] * 2.0 + 1.0


@cute.jit
def probe_scale_shift(mX: cute.Tensor, mO: cute.Tensor, stream: cuda.CUstream):
    thr = cute.make_ordered_layout((4, 32), order=(1, 0))
    val = cute.make_ordered_layout((1, 4), order=(1, 0))
    tiler, tv = cute.make_layout_tv(thr, val)
    gX = cute.zipped_divide(mX, tiler)
    gO = cute.zipped_divide(mO, tiler)
    cX = cute.zipped_divide(cute.make_identity_tensor(mX.shape), tiler=tiler)
    probe_scale_shift_kernel(gX, gO, cX, mX.shape, tv).launch(
        grid=[cute.size(gO, mode=[1]), 1, 1], block=[cute.size(tv, mode=[0]), 1, 1],
        stream=stream)


def run(x):
    out = torch.empty_like(x)
    args = [from_dlpack(t).mark_layout_dynamic() for t in (x, out)]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    compiled = cute.compile(probe_scale_shift, *args, stream)
    compiled(*args, stream)
    return out
'''

PTX_SOURCE = r"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry cutegen_probe_ptx_iota(.param .u64 out, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
DONE:
    ret;
}
"""

NVRTC_SOURCE = """
extern "C" __global__ void cutegen_probe_nvrtc_triple(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 3.0f;
}
"""


def _emit(tag: str, payload: Any = None) -> None:
    line = f"PROBE {tag}" + ("" if payload is None else " " + json.dumps(payload))
    print(line, flush=True)


def _cute_run(workdir: Path, n: int = 1 << 20) -> dict[str, Any]:
    import torch

    path = workdir / "probe_cute_kernel.py"
    path.write_text(CUTE_SOURCE)
    spec = importlib.util.spec_from_file_location("probe_cute_kernel", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.randn(n // 1024, 1024, device="cuda")
    t0 = time.perf_counter()
    out = mod.run(x)
    torch.cuda.synchronize()
    ok = bool(torch.allclose(out, x * 2 + 1))
    return {"cute_correct": ok, "cute_compile_and_run_s": round(time.perf_counter() - t0, 2)}


def _scenario_a(_: argparse.Namespace) -> dict[str, Any]:
    import torch

    a = torch.randn(512, 512, device="cuda")
    b = torch.randn(512, 512, device="cuda")
    c = torch.softmax(a @ b, dim=-1)
    host = c.sum().item()
    up = torch.ones(1000).cuda()
    return {"sum": round(host, 3), "upload_numel": up.numel()}


def _scenario_b(ns: argparse.Namespace) -> dict[str, Any]:
    return _cute_run(Path(ns.workdir))


def _scenario_c(_: argparse.Namespace) -> dict[str, Any]:
    import ctypes

    import cuda.bindings.driver as cu
    import torch

    n = 4096
    out = torch.zeros(n, dtype=torch.int32, device="cuda")  # makes the primary context current

    def check(res: Any) -> Any:
        err = res[0] if isinstance(res, tuple) else res
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"driver call failed: {err}")
        return res[1] if isinstance(res, tuple) and len(res) > 1 else None

    image = ctypes.create_string_buffer(PTX_SOURCE.encode())
    module = check(cu.cuModuleLoadData(ctypes.addressof(image)))
    func = check(cu.cuModuleGetFunction(module, b"cutegen_probe_ptx_iota"))
    p_out = ctypes.c_void_p(out.data_ptr())
    p_n = ctypes.c_uint32(n)
    params = (ctypes.c_void_p * 2)(ctypes.addressof(p_out), ctypes.addressof(p_n))
    stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)
    check(cu.cuLaunchKernel(func, n // 256, 1, 1, 256, 1, 1, 0, stream,
                            ctypes.addressof(params), 0))
    torch.cuda.synchronize()
    ok = bool(torch.equal(out.cpu(), torch.arange(n, dtype=torch.int32)))
    return {"ptx_correct": ok}


def _scenario_d(_: argparse.Namespace) -> dict[str, Any]:
    import torch

    compile_kernel = getattr(torch.cuda, "_compile_kernel", None)
    if compile_kernel is None:
        return {"compile_kernel": "absent in this torch"}
    k = compile_kernel(NVRTC_SOURCE, "cutegen_probe_nvrtc_triple")
    x = torch.ones(4096, device="cuda")
    k(grid=(16, 1, 1), block=(256, 1, 1), args=[x, 4096])
    torch.cuda.synchronize()
    return {"nvrtc_correct": bool(torch.all(x == 3).item())}


def _scenario_e(_: argparse.Namespace) -> dict[str, Any]:
    import torch

    x = torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            torch.relu(x * 2 + 1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.relu(x * 2 + 1)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    return {"graph_correct": bool(torch.allclose(y, torch.relu(x * 2 + 1))), "replays": 3}


def _scenario_f(_: argparse.Namespace) -> dict[str, Any]:
    import torch

    x = torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = torch.sin(x) * 3
    s.synchronize()
    return {"side_stream_handle": hex(s.cuda_stream),
            "default_stream_handle": hex(torch.cuda.current_stream().cuda_stream),
            "side_correct": bool(torch.allclose(y, torch.sin(x) * 3))}


def _scenario_g(ns: argparse.Namespace) -> dict[str, Any]:
    from cutegen.codegen.eval.observer import lockdown

    lockdown(Path(ns.lib))
    try:
        pid = os.fork()
    except OSError as e:
        fork = f"denied: {e}"
    else:
        if pid == 0:
            os._exit(0)
        fork = "ALLOWED (lockdown did not hold)"
    info = {"fork_after_lockdown": fork}
    info.update(_cute_run(Path(ns.workdir)))
    return info


def _tiny_kernels(n: int = 2000, reps: int = 3) -> list[float]:
    import torch

    x = torch.zeros(16, device="cuda")
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / n * 1e6)
    return out


def _memset_256mib() -> float:
    import cuda.bindings.driver as cu
    import torch

    nbytes = 256 << 20
    buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()
    cs = cu.CUstream(stream.cuda_stream)
    cu.cuMemsetD8Async(buf.data_ptr(), 1, nbytes, cs)  # warm-up
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record(stream)
    (err,) = cu.cuMemsetD8Async(buf.data_ptr(), 0, nbytes, cs)
    e1.record(stream)
    torch.cuda.synchronize()
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemsetD8Async: {err}")
    return float(e0.elapsed_time(e1))


def _scenario_h(_: argparse.Namespace) -> dict[str, Any]:
    return {"tiny_kernel_us": [round(v, 3) for v in _tiny_kernels()],
            "memset_256mib_event_ms": round(_memset_256mib(), 4)}


def _scenario_i(_: argparse.Namespace) -> dict[str, Any]:
    import torch

    x = torch.randn(1 << 16, device="cuda")
    for _ in range(5):
        x = x * 1.0001  # before: 5 kernels
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(7):
            x = x + 1  # during: 7 kernels
        torch.cuda.synchronize()
    for _ in range(11):
        x = x * 0.5  # after: 11 kernels
    torch.cuda.synchronize()
    names = {e.key for e in prof.key_averages()}
    return {"kernels_launched": {"before": 5, "during": 7, "after": 11},
            "profiler_saw_events": len(names)}


SCENARIOS: dict[str, tuple[str, Callable[[argparse.Namespace], dict[str, Any]]]] = {
    "a": ("torch ops (matmul, softmax)", _scenario_a),
    "b": ("CuTe DSL kernel y = 2x + 1", _scenario_b),
    "c": ("PTX via cuModuleLoadData + cuLaunchKernel", _scenario_c),
    "d": ("torch.cuda._compile_kernel (NVRTC)", _scenario_d),
    "e": ("CUDA graph replay of torch ops", _scenario_e),
    "f": ("kernel on a side stream", _scenario_f),
    "g": ("lockdown, fork must fail, CuTe kernel still runs", _scenario_g),
    "h": ("overhead: 2,000 tiny kernels, 256 MiB memset", _scenario_h),
    "i": ("torch.profiler session inside the child", _scenario_i),
}


def child_main(ns: argparse.Namespace) -> int:
    import torch

    torch.cuda.init()
    from cutegen.codegen.eval.observer_build import find_libcupti

    mapped = find_libcupti()
    if ns.observer != "off":
        from cutegen.codegen.eval.observer import attach

        key, out, ctl = (int(v) for v in ns.fds.split(","))
        cupti = mapped or Path(ns.cupti)
        attach(lib=Path(ns.lib), cupti=cupti, key_fd=key, out_fd=out, ctl_fd=ctl,
               no_api=ns.observer == "no_api")
    _emit("ready", {"libcupti": str(mapped), "torch": torch.__version__})
    try:
        info = SCENARIOS[ns.scenario][1](ns)
        torch.cuda.synchronize()
    except BaseException:
        _emit("failed", traceback.format_exc())
        info = None
    if info is not None:
        _emit("info", info)
    _emit("done")
    sys.stdin.read()  # stay alive (and observed) until the parent has flushed
    return 0


# -- the parent --------------------------------------------------------------------------------


class Out:
    """Prints and keeps a copy in DIR/observer_probe.txt (written as it goes)."""

    def __init__(self, path: Path) -> None:
        self.f: TextIO = open(path, "w")  # closed in close()

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def _reader(stream: TextIO, q: queue.Queue[str | None]) -> None:
    for line in stream:
        q.put(line.rstrip("\n"))
    q.put(None)


def _us(start: int, end: int) -> str:
    if not start or not end:
        return "incomplete"
    return f"{(end - start) / 1000:.2f}"


def _print_records(out: Out, recs: list[Any], *, rows: int = MAX_ROWS) -> dict[str, Any]:
    from cutegen.codegen.eval.observer_records import (
        ApiRec,
        FlushedRec,
        HelloRec,
        KernelRec,
        MemcpyRec,
        MemsetRec,
        ModuleRec,
        NoteRec,
    )

    counts: dict[str, int] = {}
    shown = 0
    stats: dict[str, Any] = {"kernels": [], "memsets": [], "modules": [], "launch_api": 0,
                             "flushed": None}
    out(f"  {'kind':<12} {'name':<60} {'stream':>6} {'dur_us':>10} {'corr':>8}")
    for r in recs:
        kind = type(r).__name__.removesuffix("Rec").upper()
        counts[kind] = counts.get(kind, 0) + 1
        row = None
        if isinstance(r, KernelRec):
            stats["kernels"].append(r)
            graph = f" [graph {r.graph_id}]" if r.graph_id else ""
            row = ("KERNEL", (r.name + graph)[:60], str(r.stream_id), _us(r.start, r.end),
                   r.correlation_id)
        elif isinstance(r, MemcpyRec):
            row = (f"MEMCPY {r.copy_kind}", f"{r.bytes} B {r.src_kind}->{r.dst_kind}",
                   str(r.stream_id), _us(r.start, r.end), r.correlation_id)
        elif isinstance(r, MemsetRec):
            stats["memsets"].append(r)
            row = ("MEMSET", f"{r.bytes} B value {r.value}", str(r.stream_id),
                   _us(r.start, r.end), r.correlation_id)
        elif isinstance(r, ApiRec):
            if r.domain == "driver" and "Launch" in r.name:
                stats["launch_api"] += 1
            row = (f"API {r.domain[:3]}", r.name[:60], "-", _us(r.start, r.end),
                   r.correlation_id)
        elif isinstance(r, HelloRec):
            out(f"  HELLO pid {r.pid} cupti_version {r.cupti_version} flags {r.flags!r} "
                f"clock {r.clock}")
        elif isinstance(r, NoteRec):
            out(f"  NOTE[{r.level}] {r.text}")
        elif isinstance(r, FlushedRec):
            stats["flushed"] = r
        elif isinstance(r, ModuleRec):
            stats["modules"].append(r)
        if row is not None:
            if shown < rows:
                out(f"  {row[0]:<12} {row[1]:<60} {row[2]:>6} {row[3]:>10} {row[4]:>8}")
            shown += 1
    if shown > rows:
        out(f"  ... {shown - rows} more activity rows")
    for r in recs:
        if isinstance(r, ModuleRec):
            out(f"  MODULE id {r.module_id} size {r.cubin_size} sha256 {r.sha256.hex()[:16]} "
                f"flags {r.flags!r} thread {r.thread_id}")
            out(f"    origin: {r.origin}")
            out(f"    chain:  {' > '.join(r.chain)}")
            names = ", ".join(n[:80] for n in r.kernel_names[:4])
            out(f"    kernels ({len(r.kernel_names)}): {names}")
    out(f"  counts: {counts}")
    f = stats["flushed"]
    if f is not None:
        out(f"  FLUSHED dropped {f.dropped_total} records_total {f.records_total} "
            f"launch_callbacks {f.launch_calls} driver_launch_api_records {stats['launch_api']} "
            f"health {f.health!r}")
    return stats


def run_child(out: Out, ns: argparse.Namespace, scenario: str, observer: str,
              lib: Path, cupti: Path | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Runs one child; returns (its info dict, record stats)."""
    from cutegen.codegen.eval.observer import ObserverChannel, ObserverSilent

    ch = ObserverChannel() if observer != "off" else None
    fds = ch.child_fds() if ch else ()
    argv = [sys.executable, os.path.abspath(__file__), "--child", scenario, "--lib", str(lib),
            "--cupti", str(cupti or ""), "--observer", observer, "--workdir", ns.workdir,
            "--fds", ",".join(map(str, fds)) or "-"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    err_file = tempfile.TemporaryFile(mode="w+")
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=err_file, text=True, env=env, start_new_session=True)
    if ch:
        ch.after_spawn()
    q: queue.Queue[str | None] = queue.Queue()
    assert proc.stdout is not None and proc.stdin is not None
    threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
    info: dict[str, Any] | None = None
    stats: dict[str, Any] = {}
    done = False
    try:
        while time.monotonic() - t0 < CHILD_TIMEOUT_S:
            try:
                line = q.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if not line.startswith("PROBE "):
                continue
            tag, _, rest = line[6:].partition(" ")
            if tag == "ready":
                out(f"  child ready after {time.monotonic() - t0:.1f} s: {rest}")
            elif tag == "info":
                info = json.loads(rest)
                out(f"  info: {rest}")
            elif tag == "failed":
                out("  SCENARIO FAILED in the child:")
                for tl in json.loads(rest).splitlines():
                    out("    " + tl)
            elif tag == "done":
                done = True
                break
        if not done:
            out(f"  child did not finish (exit {proc.poll()}, {time.monotonic() - t0:.0f} s)")
        if ch:
            t1 = time.monotonic()
            asked_ns = time.monotonic_ns()
            try:
                recs = ch.flush(20.0)
                out(f"  flush answered in {(time.monotonic() - t1) * 1000:.1f} ms, "
                    f"{len(recs)} records")
                stats = _print_records(out, recs, rows=0 if scenario == "h" else MAX_ROWS)
                ends = [k.end for k in stats["kernels"] if k.end]
                if ends and len(ch.clock):
                    ago = (asked_ns - ch.clock.to_mono_ns(max(ends))) / 1e6
                    out(f"  clock: the last kernel ended {ago:.2f} ms before the flush was "
                        f"asked (CUPTI->monotonic offset {ch.clock.offset_ns} ns); must be "
                        "positive and below the child's run time")
            except ObserverSilent as e:
                out(f"  OBSERVER SILENT: {e.reason}")
    finally:
        with_stdin = proc.stdin
        try:
            with_stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        if ch:
            ch.close()
        err_file.seek(0)
        tail = err_file.read()[-3000:]
        err_file.close()
        if proc.returncode not in (0, None) or not done:
            out(f"  child exit {proc.returncode}; stderr tail:")
            for tl in tail.splitlines()[-30:]:
                out("    " + tl)
    return info, stats


def _versions(out: Out, lib: Path, cupti: Path | None) -> None:
    from cutegen.codegen.eval import observer_build as ob

    out(f"python {sys.version.split()[0]}  observer lib {lib}")
    inc = ob.find_cupti_include()
    out(f"cupti include {inc} (CUPTI_API_VERSION {ob.cupti_header_version(inc) if inc else '?'})"
        f"  libcupti (parent's pick) {cupti}")
    from importlib import metadata

    for dist in ("torch", "cuda-bindings", "nvidia-cutlass-dsl", "nvidia-cuda-cupti"):
        try:
            out(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out(f"{dist}: not installed")
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
        out(f"nvidia-smi: {smi.stdout.strip()}")
    except (OSError, subprocess.TimeoutExpired) as e:
        out(f"nvidia-smi: {e}")


def parent_main(ns: argparse.Namespace) -> int:
    from cutegen.codegen.eval.observer_build import find_libcupti, observer_library

    outdir = Path(ns.out)
    outdir.mkdir(parents=True, exist_ok=True)
    out = Out(outdir / "observer_probe.txt")
    start = time.monotonic()
    try:
        t0 = time.monotonic()
        lib = observer_library()
        out(f"observer built/found in {time.monotonic() - t0:.1f} s")
        cupti = find_libcupti()
        _versions(out, lib, cupti)
        only = [s.strip() for s in ns.only.split(",")] if ns.only else list(SCENARIOS)
        with tempfile.TemporaryDirectory(prefix="cutegen-probe-") as wd:
            ns.workdir = wd
            for key in only:
                title = SCENARIOS[key][0]
                out()
                if time.monotonic() - start > BUDGET_S:
                    out(f"== ({key}) {title}: SKIPPED (time budget of {BUDGET_S:.0f} s spent)")
                    continue
                out(f"== ({key}) {title}")
                try:
                    if key == "h":
                        _overhead(out, ns, lib, cupti)
                    else:
                        info, stats = run_child(out, ns, key, "on", lib, cupti)
                        _verdict(out, key, info, stats)
                except Exception:
                    out("  PROBE ERROR (parent side):")
                    for tl in traceback.format_exc().splitlines():
                        out("    " + tl)
        out()
        out(f"probe finished in {time.monotonic() - start:.0f} s")
    finally:
        out.close()
    return 0


def _verdict(out: Out, key: str, info: dict[str, Any] | None, stats: dict[str, Any]) -> None:
    kernels = stats.get("kernels", [])
    names = {k.name for k in kernels}
    want = {"b": "probe_scale_shift_kernel", "c": "cutegen_probe_ptx_iota",
            "d": "cutegen_probe_nvrtc_triple", "g": "probe_scale_shift_kernel"}.get(key)
    if want:
        seen = any(want in n for n in names)
        out(f"  -> kernel {want!r} {'SEEN' if seen else 'NOT SEEN'} in KERNEL records")
        mods = [m for m in stats.get("modules", []) if any(want in n for n in m.kernel_names)]
        for m in mods:
            out(f"  -> its MODULE: origin {m.origin!r}, {len(m.kernel_names)} kernel names")
        if not mods:
            out("  -> no MODULE record lists it")
    if key == "e":
        graphed = [k for k in kernels if k.graph_id]
        out(f"  -> {len(graphed)} KERNEL records carry a graph id (3 replays)")
    if key == "f":
        out(f"  -> KERNEL stream ids: {sorted({k.stream_id for k in kernels})}")
    if key == "i" and stats.get("flushed") is not None:
        f = stats["flushed"]
        out(f"  -> {len(kernels)} KERNEL records for 23 launched (+ randn); launch callbacks "
            f"{f.launch_calls} vs driver launch API records {stats['launch_api']}; "
            f"health {f.health!r}")
    if info is None:
        out("  -> the scenario did not report (see above)")


def _overhead(out: Out, ns: argparse.Namespace, lib: Path, cupti: Path | None) -> None:
    results: dict[str, Any] = {}
    for mode in ("off", "on", "no_api"):
        out(f"  -- observer {mode}")
        info, stats = run_child(out, ns, "h", mode, lib, cupti)
        results[mode] = (info, stats)
    rows = []
    for mode, (info, _) in results.items():
        if info:
            rows.append(f"{mode}: {statistics.median(info['tiny_kernel_us']):.2f} us/kernel "
                        f"(runs {info['tiny_kernel_us']})")
    out("  -> tiny torch kernel, mean per launch incl. sync: " + "; ".join(rows))
    info, stats = results["on"]
    if info:
        big = [m for m in stats.get("memsets", []) if m.bytes == 256 << 20]
        rec = f"{(big[-1].end - big[-1].start) / 1e6:.4f} ms" if big else "no 256 MiB MEMSET"
        out(f"  -> 256 MiB memset: CUDA events {info['memset_256mib_event_ms']} ms, "
            f"MEMSET record {rec}")
        out(f"  -> KERNEL records: {len(stats.get('kernels', []))} (expect >= 6800: 200 + 3 x "
            "2000 adds, plus torch's own)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="folder for observer_probe.txt")
    p.add_argument("--only", default="", help="comma-separated scenario letters")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--lib", help=argparse.SUPPRESS)
    p.add_argument("--cupti", help=argparse.SUPPRESS)
    p.add_argument("--observer", default="on", help=argparse.SUPPRESS)
    p.add_argument("--fds", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.child:
        ns.scenario = ns.child
        return child_main(ns)
    if not ns.out:
        p.error("--out DIR is required")
    return parent_main(ns)


if __name__ == "__main__":
    sys.exit(main())
