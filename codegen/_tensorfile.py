"""A minimal tensor file format for handing outputs from a worker to the verifier.

Layout: 8-byte little-endian header length, a JSON header (dtype, shape, and the byte
offset of each tensor), then raw little-endian bytes. Only plain dense tensors and
Python scalars are stored; whatever type the candidate returned, the verifier sees bytes.
torch is imported lazily (workers only).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

_DTYPES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a flat list (nested tuples and lists unrolled in order)."""
    if isinstance(out, (list, tuple)):
        items: list[Any] = []
        for o in out:
            items.extend(flatten_outputs(o))
        return items
    return [out]


def dtype_name(dt: Any) -> str:
    return str(dt).removeprefix("torch.")


def save(path: str | Path, items: list[Any]) -> None:
    """Write tensors (moved to CPU, made contiguous) and scalars to ``path`` atomically.

    Each tensor's bytes go from its CPU copy straight to the file (no intermediate
    ``bytes``): an output of several GiB costs one device-to-host copy and one write.
    """
    import torch

    header: list[dict[str, Any]] = []
    arrays: list[Any] = []
    offset = 0
    for x in items:
        if isinstance(x, torch.Tensor):
            name = dtype_name(x.dtype)
            if name not in _DTYPES:
                raise TypeError(f"unsupported output dtype {x.dtype}")
            t = x.detach().to("cpu").contiguous()
            raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else None
            nbytes = 0 if raw is None else int(raw.nbytes)
            header.append({"kind": "tensor", "dtype": name, "shape": list(t.shape),
                           "offset": offset, "nbytes": nbytes})
            if raw is not None:
                arrays.append(raw)
            offset += nbytes
        elif isinstance(x, (bool, int, float)):
            header.append({"kind": "scalar", "value": x})
        else:
            raise TypeError(f"unsupported output type {type(x).__name__}")
    head = json.dumps(header).encode()
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb", buffering=0) as f:
        _write_all(f, memoryview(struct.pack("<Q", len(head)) + head))
        for a in arrays:
            _write_all(f, memoryview(a))
    os.replace(tmp, path)


_CHUNK = 64 << 20


def _write_all(f: Any, buf: memoryview) -> None:
    """Write ``buf`` to the unbuffered file ``f`` in 64 MiB pieces (one huge write is
    slower on tmpfs, and a raw write may be partial)."""
    buf = buf.cast("B")
    pos = 0
    while pos < len(buf):
        pos += f.write(buf[pos:pos + _CHUNK])


def _read_exact(f: Any, buf: memoryview) -> int:
    """Fill ``buf`` from the unbuffered file ``f``; the number of bytes read (short at EOF)."""
    got = 0
    while got < len(buf):
        n = f.readinto(buf[got:])
        if not n:
            break
        got += n
    return got


def load(path: str | Path, device: str = "cpu") -> list[Any]:
    """Read what :func:`save` wrote. Tensors are returned on ``device``.

    Each tensor is read straight into its own CPU buffer (one copy out of the file), so
    a multi-GiB output does not pass through several temporary ``bytes`` objects.

    Raises:
        ValueError: the file is malformed (truncated, bad header).
    """
    import torch

    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(8)
        if len(first) < 8:
            raise ValueError("tensor file too short")
        (n,) = struct.unpack("<Q", first)
        if 8 + n > size:
            raise ValueError("tensor file truncated (header)")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"bad tensor file header: {e}") from e
        if not isinstance(header, list):
            raise ValueError("bad tensor file header: not a list")
        base = 8 + n
        out: list[Any] = []
        for h in header:
            if h["kind"] == "scalar":
                out.append(h["value"])
                continue
            if h["dtype"] not in _DTYPES:
                raise ValueError(f"bad tensor file header: dtype {h['dtype']!r}")
            dt = getattr(torch, h["dtype"])
            start, nbytes = base + int(h["offset"]), int(h["nbytes"])
            if nbytes < 0 or start + nbytes > size:
                raise ValueError("tensor file truncated")
            if not nbytes:
                out.append(torch.empty(h["shape"], dtype=dt).to(device))
                continue
            buf = torch.empty(nbytes, dtype=torch.uint8)
            f.seek(start)
            if _read_exact(f, memoryview(buf.numpy())) != nbytes:
                raise ValueError("tensor file truncated")
            out.append(buf.view(dt).reshape(h["shape"]).to(device))
    return out
