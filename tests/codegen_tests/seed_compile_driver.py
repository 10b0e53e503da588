"""Compile-only driver for one seed candidate: run in a child process, prints one JSON line.

    python seed_compile_driver.py SEED.py CASES.json

CASES.json is a list of cases ``{"tunables": {...}, "init": [...], "inputs": [{"shape": [...],
"dtype": "bfloat16", "offset": 0}]}`` (``offset`` shifts the tensor's start by that many
elements, to make rows that are not 16-byte aligned). For each case the driver applies the
tunables to the seed's source text (the search's own ``set_tunable``), writes the result to a
temporary .py file (the DSL needs real source files), imports it, and calls
``ModelNew(*init)(*inputs)`` on CPU tensors with

* ``torch.cuda.current_stream()`` replaced by an object whose ``cuda_stream`` is 0, and
* the DSL's compile (``CompileCallable.__call__``, what ``cute.compile`` is) wrapped: it
  records each compiled object's kernel names, SASS and per-kernel register counts, and
  returns a no-op instead of the launchable function.

The environment (``CUTE_DSL_ARCH=sm_90a``, ``CUTE_DSL_KEEP``, ``CUTE_DSL_DUMP_DIR``) is set by
whoever starts this process. Output: ``{"cases": [{"error": str | None, "compiles": [...]}]}``
where each compile is ``{"seconds", "kernels": {name: {"regs", "frame", "ops": {...},
"mma": {...}, "in_flight": n}}}``: ``ops`` counts the memory instructions of that kernel's SASS
(``LDG.E.128``, ``STL`` ...), ``in_flight`` is the most global loads issued before one is used
(``profilers._sass_text.loads_in_flight``).
"""

import importlib.util
import json
import re
import struct
import sys
import tempfile
import time
import traceback
import types
from collections import Counter
from pathlib import Path

from cutegen.profilers._sass_text import parse_sass

#: SASS memory opcodes the tests look at (the width suffix is kept: LDG.E.128, LDG.E.64 ...).
_OP_RE = re.compile(r"\b(LDG|STG|LDS|STS|LDL|STL|LD|ST|LDGSTS|ATOMG|RED)(\.[A-Z0-9_.]+)?\b")
_EIATTR_REGCOUNT = 0x2F
_EIATTR_FRAME_SIZE = 0x11


def cubin_resources(cubin: bytes) -> dict[str, dict[str, int]]:
    """Registers and stack frame bytes per kernel, read from the cubin's .nv.info section."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = []
    for i in range(shnum):
        name, _typ, _flags, _addr, off, size, link, _info, _align, _entsize = struct.unpack_from(
            "<IIQQQQIIQQ", cubin, shoff + i * shentsize
        )
        sections.append((name, off, size, link))

    def cstr(table_off: int, idx: int) -> str:
        end = cubin.index(b"\0", table_off + idx)
        return cubin[table_off + idx : end].decode()

    shstr_off = sections[shstrndx][1]
    named = {cstr(shstr_off, s[0]): s for s in sections}
    symtab = named.get(".symtab")
    if symtab is None or ".nv.info" not in named:
        return {}
    strtab_off = sections[symtab[3]][1]
    symbols = []
    for i in range(symtab[2] // 24):
        st_name = struct.unpack_from("<I", cubin, symtab[1] + 24 * i)[0]
        symbols.append(cstr(strtab_off, st_name))
    out: dict[str, dict[str, int]] = {}
    _, off, size, _ = named[".nv.info"]
    pos = off
    while pos < off + size:
        fmt, attr = cubin[pos], cubin[pos + 1]
        if fmt == 0x04:  # EIFMT_SVAL: u16 size, payload
            (length,) = struct.unpack_from("<H", cubin, pos + 2)
            if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE) and length == 8:
                sym, value = struct.unpack_from("<II", cubin, pos + 4)
                key = "regs" if attr == _EIATTR_REGCOUNT else "frame"
                out.setdefault(symbols[sym], {})[key] = value
            pos += 4 + length
        elif fmt == 0x03:  # EIFMT_HVAL: u16 value
            pos += 4
        else:
            pos += 2
    return out


def _count_per_kernel(sass: str, pattern: re.Pattern, key) -> dict[str, Counter]:
    """Counts of ``key(match)`` over the instructions of each kernel of an nvdisasm listing
    (one ``.text.<kernel>`` section per kernel; only the opcode part of each line)."""
    per: dict[str, Counter] = {}
    current = None
    for line in sass.splitlines():
        m = re.match(r"\s*\.section\s+\.text\.(\S+?),", line)
        if m:
            current = m.group(1)
            per.setdefault(current, Counter())
            continue
        if current is None or not re.match(r"\s*/\*[0-9a-f]+\*/", line):
            continue
        body = line.split("*/", 1)[1].split(";")[0]
        for m in pattern.finditer(body):
            per[current][key(m)] += 1
    return per


def sass_ops(sass: str) -> dict[str, Counter]:
    """Memory-op counts per kernel (the width suffix kept: LDG.E.128)."""
    return _count_per_kernel(sass, _OP_RE, lambda m: m.group(1) + (m.group(2) or ""))


_MMA_RE = re.compile(
    r"\b(HGMMA\.[0-9A-Za-z.]+|HMMA\.[0-9A-Za-z.]+|FFMA|FADD|UTMALDG\.[0-9]D\.IM2COL|UTMALDG|UTMASTG"
    r"|MUFU\.[0-9A-Z]+|DMUL|DADD|DFMA)\b")


def mma_ops(sass: str) -> dict[str, Counter]:
    """Per kernel: counts of the math and TMA instructions the family tests look at
    (``HGMMA.<shape>.<types>``, ``HMMA``, ``FFMA``, ``UTMALDG`` (tile mode),
    ``UTMALDG.<n>D.IM2COL`` (im2col mode, the conv family's activation loads), ``UTMASTG``,
    the special-function unit's ``MUFU.<fn>``: ``MUFU.TANH`` only from an approximate
    tanh, and float64 arithmetic: ``DMUL``, ``DADD``, ``DFMA``)."""
    return _count_per_kernel(sass, _MMA_RE, lambda m: m.group(1))


def _patch(records: list) -> None:
    import torch
    from cutlass.base_dsl.compiler import CompileCallable

    stream = types.SimpleNamespace(cuda_stream=0)
    torch.cuda.current_stream = lambda *a, **k: stream  # type: ignore[assignment]
    original = CompileCallable.__call__

    def compile_only(self, *args, **kwargs):
        t0 = time.perf_counter()
        compiled = original(self, *args, **kwargs)
        seconds = time.perf_counter() - t0
        arts = compiled.artifacts
        resources = cubin_resources(arts.CUBIN) if arts.CUBIN else {}
        ops = sass_ops(arts.SASS or "")
        mma = mma_ops(arts.SASS or "")
        in_flight = {k.name: k.ldg_in_flight for k in parse_sass(arts.SASS or "")}
        kernels = {}
        for name in compiled.kernel_info:
            kernels[name] = {**resources.get(name, {}), "ops": dict(ops.get(name, {})),
                             "mma": dict(mma.get(name, {})),
                             "in_flight": in_flight.get(name, 0)}
        records.append({"seconds": round(seconds, 3), "kernels": kernels})
        return lambda *a, **k: None

    CompileCallable.__call__ = compile_only  # type: ignore[method-assign]


def _make_input(spec: dict):
    import torch

    dtype = getattr(torch, spec["dtype"])
    shape = tuple(spec["shape"])
    n = 1
    for s in shape:
        n *= s
    off = int(spec.get("offset", 0))
    flat = torch.empty(n + off, dtype=dtype)  # compile-only: the values are never read
    return flat[off:].view(shape)


def _load_seed(source: str, tunables: dict, workdir: Path, tag: str):
    from cutegen.codegen.candidate import set_tunable

    for k, v in tunables.items():
        source = set_tunable(source, k, v)
    path = workdir / f"seed_{tag}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"seed_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    seed_path, cases_path = Path(argv[1]), Path(argv[2])
    cases = json.loads(cases_path.read_text())
    source = seed_path.read_text(encoding="utf-8")
    records: list = []
    _patch(records)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            start = len(records)
            error = None
            try:
                module = _load_seed(source, case.get("tunables", {}), Path(tmp), str(i))
                model = module.ModelNew(*case.get("init", []))
                inputs = [_make_input(s) for s in case["inputs"]]
                model(*inputs)
            except Exception:
                error = traceback.format_exc(limit=8)
            results.append({"error": error, "compiles": records[start:]})
    print(json.dumps({"cases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
