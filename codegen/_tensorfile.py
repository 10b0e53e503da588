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
    """Write tensors (moved to CPU, made contiguous) and scalars to ``path`` atomically."""
    import torch

    header: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    offset = 0
    for x in items:
        if isinstance(x, torch.Tensor):
            name = dtype_name(x.dtype)
            if name not in _DTYPES:
                raise TypeError(f"unsupported output dtype {x.dtype}")
            t = x.detach().to("cpu").contiguous()
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            header.append({"kind": "tensor", "dtype": name, "shape": list(t.shape),
                           "offset": offset, "nbytes": len(raw)})
            blobs.append(raw)
            offset += len(raw)
        elif isinstance(x, (bool, int, float)):
            header.append({"kind": "scalar", "value": x})
        else:
            raise TypeError(f"unsupported output type {type(x).__name__}")
    head = json.dumps(header).encode()
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load(path: str | Path, device: str = "cpu") -> list[Any]:
    """Read what :func:`save` wrote. Tensors are returned on ``device``.

    Raises:
        ValueError: the file is malformed (truncated, bad header).
    """
    import torch

    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError("tensor file too short")
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + n])
    except json.JSONDecodeError as e:
        raise ValueError(f"bad tensor file header: {e}") from e
    base = 8 + n
    out: list[Any] = []
    for h in header:
        if h["kind"] == "scalar":
            out.append(h["value"])
            continue
        dt = getattr(torch, h["dtype"])
        start, nbytes = base + h["offset"], h["nbytes"]
        if start + nbytes > len(data):
            raise ValueError("tensor file truncated")
        buf = bytearray(data[start:start + nbytes])
        if nbytes:
            t = torch.frombuffer(buf, dtype=torch.uint8).view(dt).reshape(h["shape"])
        else:
            t = torch.empty(h["shape"], dtype=dt)
        out.append(t.to(device))
    return out
