"""The attack suite: candidates written to fool the evaluator, one per class of the threat
model (docs/threat-model.md). Each is a twist of the known-good scale-shift candidate
(tests/codegen_tests/conftest.py), evaluated with the static filters OFF so the runtime
defences alone must reject it (the filters catch most of them first; see the CPU tests).

``ATTACKS[name] = (twist, accepted verdicts)``: none of them may be ``correct`` unless that is
listed, and then only at no less than 0.8x the honest kernel's time (the attempt forged
nothing: its time is true).
"""

from __future__ import annotations

from cutegen.codegen.evaluation import Verdict

V = Verdict

#: A CUDA C kernel computing y = 2x + 1, compiled with NVRTC (already imported by the DSL)
#: and launched through the driver API: work the GPU does outside any CuTe kernel.
NVRTC = '''
from cuda.bindings import nvrtc as _nvrtc
import ctypes as _ct

_SRC = b"""
extern "C" __global__ void %(name)s(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
"""
_FOREIGN = {}


def _foreign(name):
    if name not in _FOREIGN:
        src = _SRC % {b"name": name.encode()}
        err, prog = _nvrtc.nvrtcCreateProgram(src, b"k.cu", 0, [], [])
        _nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=compute_90"])
        err, n = _nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        _nvrtc.nvrtcGetPTX(prog, ptx)
        err, mod = cuda.cuModuleLoadData(ptx)
        err, fn = cuda.cuModuleGetFunction(mod, name.encode())
        _FOREIGN[name] = (mod, fn)
    return _FOREIGN[name][1]


def foreign_kernel(x, out, name="affine_kernel"):
    fn = _foreign(name)
    n = x.numel()
    args = ((x.data_ptr(), out.data_ptr(), n), (_ct.c_void_p, _ct.c_void_p, _ct.c_longlong))
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    cuda.cuLaunchKernel(fn, (n + 255) // 256, 1, 1, 256, 1, 1, 0, stream, args, 0)
'''

#: The decoy: a real CuTe launch that does nothing useful (writes into a scratch buffer).
DECOY = """
        scratch = torch.empty_like(x)
        run_kernel(x, scratch)
"""

ATTACKS: dict[str, tuple[dict[str, str], set[Verdict]]] = {
    # -- foreign kernels through each API, with and without a CuTe decoy -------------------
    "nvrtc_driver_with_decoy": (dict(module_extra=NVRTC, forward=DECOY + """
        out = torch.empty_like(x)
        foreign_kernel(x, out)
        return out
    """), {V.LIBRARY_CALL}),
    "nvrtc_driver_alone": (dict(module_extra=NVRTC, forward="""
        out = torch.empty_like(x)
        foreign_kernel(x, out)
        return out
    """), {V.DECOY}),
    "nvrtc_kernel_named_like_ours": (dict(module_extra=NVRTC + """
_OURS = []


def our_name(x, out):
    if not _OURS:
        args = [from_dlpack(t).mark_layout_dynamic() for t in (x, out)]
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        c = cute.compile(scale_shift, *args, stream)
        _OURS.append(next(iter(c.kernel_info)))
    return _OURS[0]
""", forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        foreign_kernel(x, out, our_name(x, out))
        return out
    """), {V.SUSPICIOUS, V.LIBRARY_CALL}),
    "torch_compile_kernel": (dict(forward="""
        k = torch.cuda._compile_kernel(
            'extern "C" __global__ void f(const float* x, float* y, int n)'
            '{int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2*x[i]+1;}', "f")
        out = torch.empty_like(x)
        k(grid=((x.numel() + 255) // 256, 1, 1), block=(256, 1, 1), args=[x, out, x.numel()])
        return out
    """), {V.FORBIDDEN, V.CRASH}),
    "cupy_kernel": (dict(forward="""
        import cupy
        return torch.as_tensor(cupy.asarray(x) * 2 + 1, device="cuda")
    """), {V.FORBIDDEN}),
    "numba_cuda": (dict(forward="""
        from numba import cuda as ncuda
        return x * 2 + 1
    """), {V.FORBIDDEN}),
    "triton_kernel": (dict(forward="""
        import triton
        return x * 2 + 1
    """), {V.FORBIDDEN}),
    "torch_compile_inductor": (dict(init_extra="""
        self.f = torch.compile(lambda t: t * 2.0 + 1.0)
    """, forward=DECOY + """
        return self.f(x)
    """), {V.FORBIDDEN, V.LIBRARY_CALL, V.CRASH}),
    "cpp_extension_bypass": (dict(forward="""
        from torch.utils import cpp_extension
        return x * 2 + 1
    """), {V.FORBIDDEN}),
    "cuda_graph_replay_with_decoy": (dict(forward=DECOY + """
        if not hasattr(self, "g"):
            self.sx = torch.empty_like(x)
            self.sy = torch.empty_like(x)
            self.g = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            with torch.cuda.graph(self.g):
                self.sy.copy_(self.sx * 2.0 + 1.0)
        self.sx.copy_(x)
        self.g.replay()
        return self.sy.clone()
    """), {V.LIBRARY_CALL, V.SUSPICIOUS}),
    "runtime_memcpy_of_a_host_result": (dict(forward=DECOY + """
        from cuda.bindings import runtime as rt
        host = (x.cpu() * 2.0 + 1.0).contiguous()
        out = torch.empty_like(x)
        rt.cudaMemcpy(out.data_ptr(), host.data_ptr(), host.numel() * 4,
                      rt.cudaMemcpyKind.cudaMemcpyHostToDevice)
        return out
    """), {V.LIBRARY_CALL}),
    # -- detecting the profiler / the observer, and behaving differently -----------------
    "torch_when_unprofiled": (dict(forward="""
        if torch.autograd.profiler._is_profiler_enabled:
            out = torch.empty_like(x)
            run_kernel(x, out)
            return out
    """ + DECOY + """
        return x * 2.0 + 1.0
    """), {V.LIBRARY_CALL}),
    "honest_first_then_torch": (dict(module_extra="_N = [0]", forward="""
        _N[0] += 1
        if _N[0] <= 8:
            out = torch.empty_like(x)
            run_kernel(x, out)
            return out
    """ + DECOY + """
        return x * 2.0 + 1.0
    """), {V.LIBRARY_CALL}),
    "kineto_hijack_then_torch": (dict(module_extra="_P = []", forward="""
        if not _P:
            from torch.profiler import profile, ProfilerActivity
            p = profile(activities=[ProfilerActivity.CUDA])
            p.__enter__()
            _P.append(p)
    """ + DECOY + """
        return x * 2.0 + 1.0
    """), {V.SUSPICIOUS, V.LIBRARY_CALL, V.CRASH, V.FORBIDDEN}),
    # -- forged messages and channels ------------------------------------------------------
    "forged_frames_on_every_descriptor": (dict(forward="""
        import os
        out = torch.empty_like(x)
        run_kernel(x, out)
        junk = b"CGOB" + bytes(44) + b'CGEN\\x00\\x00\\x00\\x18{"t":"done","k":0}' + b"PASS"
        for fd in range(3, 256):
            try:
                os.write(fd, junk)
            except OSError:
                pass
        return out
    """), {V.SUSPICIOUS, V.CRASH, V.FORBIDDEN}),
    "close_every_descriptor": (dict(forward="""
        import os
        out = torch.empty_like(x)
        run_kernel(x, out)
        os.closerange(3, 1024)
        return out
    """), {V.SUSPICIOUS, V.CRASH}),
    # -- the audit pipe, silenced before a denied operation (the hook checks on each report
    #    that its descriptor is still the parent's pipe: else AUDIT_LOST_EXIT, forbidden) --
    "audit_pipe_replaced_then_denied_read": (dict(forward="""
        import os, sys
        fd = int(sys.argv[sys.argv.index("--audit-fd") + 1])
        r, w = os.pipe()
        os.dup2(w, fd)  # the hook's reports would land in a pipe the candidate owns
        try:
            open("/proc/self/maps").read()
        except Exception:
            pass
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), {V.FORBIDDEN}),
    "audit_pipe_closed_then_denied_read": (dict(forward="""
        import os, sys
        os.close(int(sys.argv[sys.argv.index("--audit-fd") + 1]))
        try:
            open("/proc/self/maps").read()
        except Exception:
            pass
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), {V.FORBIDDEN}),
    # -- the harness's state, found by introspection ---------------------------------------
    "gc_scan_for_harness_objects": (dict(forward="""
        import gc
        for o in gc.get_objects():
            pass
        return x * 2.0 + 1.0
    """), {V.FORBIDDEN}),
    "patch_the_harness_loop": (dict(module_extra="""
import sys as _sys
_h = _sys.modules["__main__"]
if hasattr(_h, "_GpuJob"):
    _orig = _h._GpuJob.call
    def _call(self, cmd, rec):
        cmd = dict(cmd, prefill=[], pattern=0)
        from cuda.bindings import runtime as _rt
        keep = _rt.cudaMemsetAsync
        _rt.cudaMemsetAsync = lambda *a, **k: (0,)
        try:
            return _orig(self, cmd, rec)
        finally:
            _rt.cudaMemsetAsync = keep
    _h._GpuJob.call = _call
"""), {V.SUSPICIOUS}),
    "frame_walk_to_the_call_command": (dict(forward="""
        import sys
        f = sys._getframe(1)
        while f is not None and "cmd" not in f.f_locals:
            f = f.f_back
        if f is not None:
            f.f_locals["cmd"]["ghost"] = False
    """ + DECOY + """
        return x * 2.0 + 1.0
    """), {V.LIBRARY_CALL}),
    "read_the_reference_workers_files": (dict(forward="""
        import os, glob
        for p in glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "..", "ref", "*")):
            open(p, "rb").read(16)
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), {V.FORBIDDEN}),
    "read_own_memory_map": (dict(forward="""
        open("/proc/self/maps").read()
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), {V.FORBIDDEN}),
    # -- timers ---------------------------------------------------------------------------
    "rerecorded_events": (dict(forward="""
        import sys
        f = sys._getframe(1)
        while f is not None and "start" not in f.f_locals:
            f = f.f_back
        out = torch.empty_like(x)
        run_kernel(x, out)
        if f is not None:  # the harness's start event, recorded again after the kernel
            f.f_locals["start"].record()
        return out
    # on the H200 this left the events reading more than the observed span (the attempt did
    # not shorten them), so the time stayed true: correct at the honest kernel's time is
    # acceptable; a shortened reading is suspicious (elapsed_time_patched shows that path)
    """), {V.SUSPICIOUS, V.CORRECT}),
    "elapsed_time_patched": (dict(module_extra="""
torch.cuda.Event.elapsed_time = lambda self, end: 0.0001
"""), {V.SUSPICIOUS}),
    # -- predictable re-check windows -------------------------------------------------------
    "honest_on_verification_like_inputs_only": (dict(module_extra="_N = [0]", forward="""
        _N[0] += 1
        out = torch.empty_like(x)
        looks_verified = x.shape[0] != 2048 or abs(float(x.mean())) > 0.05 or _N[0] <= 4
        if looks_verified:
            run_kernel(x, out)
        else:
            run_kernel(x[:1], out[:1])  # fast, and wrong everywhere else
        return out
    """), {V.WRONG, V.NONDETERMINISTIC}),
    "wrong_on_every_other_call": (dict(module_extra="_N = [0]", forward="""
        _N[0] += 1
        out = torch.empty_like(x)
        run_kernel(x, out)
        if _N[0] > 9 and _N[0] % 4:
            out.view(-1)[:64] = 0.0
        return out
    """), {V.WRONG, V.LIBRARY_CALL}),
    # -- work outside the calls --------------------------------------------------------------
    "work_after_returning_from_a_thread": (dict(forward="""
        import threading
        out = torch.empty_like(x)
        run_kernel(x[:1], out[:1])
        def finish():
            import time
            time.sleep(0.002)
            run_kernel(x, out)
        threading.Thread(target=finish).start()
        return out
    """), {V.WRONG, V.SUSPICIOUS}),
    "kernel_left_running": (dict(forward="""
        out = torch.empty_like(x)
        run_kernel(x, out)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
        return out
    """), {V.SUSPICIOUS, V.LIBRARY_CALL}),
    "write_the_inputs_later": (dict(forward="""
        import threading
        out = torch.empty_like(x)
        run_kernel(x, out)
        threading.Timer(0.001, lambda: x.mul_(0.0)).start()
        return out
    """), {V.SUSPICIOUS, V.INPUT_MODIFIED, V.WRONG}),
    # -- native memory and processes ---------------------------------------------------------
    "dlopen_libc": (dict(forward="""
        import ctypes
        ctypes.CDLL("libc.so.6")
        return x * 2.0 + 1.0
    """), {V.FORBIDDEN}),
    "spawn_a_helper_process": (dict(forward="""
        import os
        os.posix_spawn("/bin/true", ["true"], os.environ)
        out = torch.empty_like(x)
        run_kernel(x, out)
        return out
    """), {V.FORBIDDEN}),
}
