"""Static checks on candidate source: cheap filters before any process is started.

RELIABILITY.md lesson 10: these catch the obvious (no kernel, a torch call doing the work,
a side stream, monkeypatching the timer, process or thread tricks); the runtime checks in
the workers do the real work. Pure functions over the source text; nothing is imported.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from cutegen.codegen.candidate import parse_python
from cutegen.codegen.evaluation import Verdict

#: torch functions that do the work a candidate must do in CuTe DSL kernels.
TORCH_COMPUTE = frozenset({
    "matmul", "mm", "bmm", "addmm", "addmv", "baddbmm", "einsum", "linear", "dot", "mv",
    "softmax", "log_softmax", "logsumexp", "layer_norm", "rms_norm", "group_norm",
    "batch_norm", "instance_norm", "cross_entropy", "nll_loss", "gelu", "relu", "silu",
    "sigmoid", "tanh", "mish", "hardswish", "leaky_relu", "elu", "softplus", "sum", "mean",
    "cumsum", "cumprod", "exp", "log", "sqrt", "rsqrt", "amax", "amin", "argmax", "argmin",
    "conv1d", "conv2d", "conv3d", "conv_transpose2d", "scaled_dot_product_attention",
    "normalize", "var", "std", "prod", "norm", "max_pool2d", "avg_pool2d", "add", "mul",
    "div", "sub", "where", "clamp", "pow", "erf", "tensordot", "outer", "triu", "tril",
})
#: Tensor methods that do such work (``x.softmax(-1)``).
TENSOR_METHODS = frozenset({
    "softmax", "log_softmax", "matmul", "mm", "bmm", "cumsum", "cumprod", "logsumexp",
    "relu", "gelu", "sigmoid", "tanh", "exp", "log", "rsqrt", "sqrt", "addmm", "baddbmm",
})
BANNED_MODULES = frozenset({
    "subprocess", "multiprocessing", "threading", "_thread", "concurrent", "socket",
    "ctypes", "_ctypes", "cffi", "_cffi_backend", "gc", "inspect", "signal", "pty",
    "asyncio", "importlib", "builtins", "mmap", "sys", "os", "traceback", "marshal",
    "torch.utils.cpp_extension", "torch.cuda._utils", "torch._inductor", "torch.profiler",
    "torch.autograd.profiler", "triton", "cupy", "cupyx", "numba", "llvmlite", "pycuda",
    "jax", "tvm", "tvm_ffi", "cuda.bindings.runtime", "cuda.bindings.nvrtc",
    "cuda.bindings.nvjitlink", "cuda.core", "cuda.cuda", "cuda.cudart", "cuda.nvrtc",
})
#: Names that reach native memory, other kernel loaders or the interpreter's internals:
#: rejected wherever they appear as a name or an attribute (lesson 10: filters, not defences).
BANNED_NAMES = frozenset({
    "ctypes", "_ctypes", "cffi", "__subclasses__", "__globals__", "__builtins__", "__code__",
    "__closure__", "__import__", "_compile_kernel", "cpp_extension", "load_inline",
    "CUDAGraph", "from_address", "c_char_p", "c_void_p", "POINTER", "pythonapi",
    "_getframe", "f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "get_objects",
    "get_referrers", "addaudithook", "_current_frames", "setprofile", "settrace",
})
#: Attribute prefixes of CUDA driver/runtime entry points that load, launch or copy code or
#: data behind the harness's back (the candidate's own module loads and launches are the
#: DSL's; copies between arbitrary pointers are a native-memory write).
BANNED_ATTR_PREFIXES = (
    "cuModule", "cuLibrary", "cuLaunch", "cuLink", "cuGraph", "cudaGraph", "cuMemcpy",
    "cudaMemcpy", "cuMemHost", "cuMemAllocHost", "cuIpc", "cudaIpc", "cuGetProcAddress",
    "cudaGetDriverEntryPoint", "cuProfiler", "cudaProfiler", "cuCtxCreate", "cuStreamBeginCapture",
    "cudaStreamBeginCapture", "nvrtc", "cupti", "cuKernel", "cuFunc", "cudaLaunch",
    "cudaLibrary", "cuMemMap", "cuMemCreate", "cuMemImport", "cuMemExport",
)
#: Substrings of string constants that only an attempt to reach those things needs.
BANNED_STRINGS = ("ctypes", "cffi", "nvrtc", "_compile_kernel", "cpp_extension", "sys.modules",
                  "__import__", "importlib", "cuModuleLoad", "cuLibraryLoad", "cuLaunchKernel",
                  "/proc/", "cupti", "__builtins__", "__globals__", "__subclasses__")
BANNED_CALLS = frozenset({
    "os.system", "os.fork", "os.forkpty", "os.popen", "os.kill", "os.killpg", "os.setsid",
    "os.execv", "os.execve", "os.execvp", "os.spawnv", "os._exit", "os.putenv",
    "sys._getframe", "sys.settrace", "sys.setprofile", "eval", "exec", "compile",
    "__import__", "open", "globals", "setattr", "delattr",
    "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
    "torch.cuda.ExternalStream", "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.compile",
})
PATCH_ROOTS = frozenset({"torch", "time", "os", "sys", "cutlass", "cute", "builtins", "numpy"})


@dataclass(frozen=True, slots=True)
class StaticResult:
    ok: bool
    verdict: Verdict | None = None
    message: str = ""
    findings: tuple[str, ...] = ()


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


@functools.lru_cache(maxsize=1024)
def check_source(code: str) -> StaticResult:
    """Run the static filters. ``ok`` is False with the verdict and the first reason.

    Cached by source text (the result is frozen): an evaluation pool calls it in the
    search thread when a candidate is submitted, so its device threads never parse.
    """
    try:
        tree = parse_python(code)
    except SyntaxError as e:
        return StaticResult(False, Verdict.COMPILE_ERROR,
                            f"Python syntax error at line {e.lineno}: {e.msg}")
    findings: list[str] = []
    aliases = _import_aliases(tree)
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in names:
        return StaticResult(False, Verdict.STATIC_REJECT,
                            "no class ModelNew: a candidate defines class ModelNew(nn.Module)")
    if not any(v.split(".")[0] == "cutlass" for v in aliases.values()):
        return StaticResult(False, Verdict.STATIC_REJECT,
                            "does not import the CuTe DSL (cutlass / cutlass.cute)")
    if not _has_kernel(tree):
        return StaticResult(False, Verdict.STATIC_REJECT,
                            "defines no @cute.kernel: the work must be done by CuTe DSL kernels")
    for node in ast.walk(tree):
        msg = _check_node(node, aliases)
        if msg:
            findings.append(f"line {getattr(node, 'lineno', '?')}: {msg}")
    if findings:
        return StaticResult(False, Verdict.STATIC_REJECT, findings[0], tuple(findings))
    return StaticResult(True)


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Map local names to the dotted module/object they refer to."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _has_kernel(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if _dotted(target).endswith("kernel"):
                    return True
    return False


def _resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


def _check_node(node: ast.AST, aliases: dict[str, str]) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        else:  # `from torch.utils import cpp_extension` imports torch.utils.cpp_extension
            base = node.module or ""
            mods = [base] + [f"{base}.{a.name}" for a in node.names]
        for m in mods:
            for banned in BANNED_MODULES:
                if m == banned or m.startswith(banned + "."):
                    return f"imports {m}, which candidates may not use"
        return ""
    if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
        return f"uses {node.id}"
    if isinstance(node, ast.Attribute):
        if node.attr in BANNED_NAMES:
            return f"uses .{node.attr}"
        if node.attr.startswith(BANNED_ATTR_PREFIXES):
            return f"uses {node.attr}: candidates launch and load only through CuTe DSL"
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        for needle in BANNED_STRINGS:
            if needle in node.value:
                return f"mentions {needle!r} in a string"
        return ""
    if isinstance(node, ast.ClassDef):
        for b in node.bases:
            if _resolve(_dotted(b), aliases) in ("torch.Tensor", "torch._C.TensorBase"):
                return f"class {node.name} subclasses torch.Tensor"
        return ""
    if isinstance(node, ast.FunctionDef) and node.name in ("__torch_function__", "__torch_dispatch__"):
        return f"defines {node.name}"
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute):
                root = _resolve(_dotted(t), aliases).split(".")[0]
                if root in PATCH_ROOTS:
                    return f"assigns to {_dotted(t)} (monkeypatching a library)"
        return ""
    if isinstance(node, ast.Call):
        name = _resolve(_dotted(node.func), aliases)
        if name in BANNED_CALLS:
            return f"calls {name}"
        parts = name.split(".")
        if parts[0] == "torch" and parts[-1] in TORCH_COMPUTE and "cutlass" not in name:
            return f"calls {name}: the work must be done in CuTe DSL kernels, not torch"
        if isinstance(node.func, ast.Attribute) and not name.startswith(("cute", "cutlass")):
            if node.func.attr in TENSOR_METHODS and _dotted(node.func.value).split(".")[0] not in (
                    "cute", "cutlass", "math"):
                return f"calls .{node.func.attr}(): the work must be done in CuTe DSL kernels"
    return ""
