"""Tensors that cross between the candidate worker and the reference worker on the GPU.

Outputs and inputs no longer travel through host files: the reference worker writes each
call's inputs into device buffers of its own that the candidate worker maps (CUDA IPC),
and the candidate worker hands each output back as an IPC handle the reference worker
maps and reads in place. A descriptor is plain JSON:

``{"handle": hex(64 bytes), "offset": bytes from the allocation's base, "dtype": "float32",
"shape": [...], "stride": [...] (elements)}`` for a tensor, ``{"value": x}`` for a scalar.

Whatever a descriptor claims, the receiver checks it against the allocation it actually
mapped (size from the driver, not from the sender). The handles themselves are made and
opened by small functions of the native observer library (:mod:`.observer`), called
through ctypes: no torch internals, no candidate-reachable Python state.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
            "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


class IpcError(Exception):
    """A descriptor that cannot be honoured (bad handle, out of range, unknown dtype)."""


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


class IpcLib:
    """The IPC entry points of the native library (``cgobs_ipc_*``)."""

    def __init__(self, lib_path: str | Path) -> None:
        lib = ctypes.CDLL(str(lib_path))
        u64p = ctypes.POINTER(ctypes.c_uint64)
        self._export = lib.cgobs_ipc_export
        self._export.argtypes = [ctypes.c_uint64, ctypes.c_char_p, u64p, u64p]
        self._open = lib.cgobs_ipc_open
        self._open.argtypes = [ctypes.c_char_p, u64p, u64p]
        self._close = lib.cgobs_ipc_close
        self._close.argtypes = [ctypes.c_uint64]
        for f in (self._export, self._open, self._close):
            f.restype = ctypes.c_int
        self._err = lib.cgobs_last_error
        self._err.restype = ctypes.c_char_p
        self._opened: dict[bytes, tuple[int, int]] = {}

    def _fail(self, what: str, rc: int) -> IpcError:
        msg = (self._err() or b"").decode(errors="replace")
        return IpcError(f"{what} failed ({rc}): {msg}")

    def export(self, dptr: int) -> tuple[bytes, int, int]:
        """(64-byte handle, allocation base, allocation size) of the allocation holding
        device pointer ``dptr``."""
        buf = ctypes.create_string_buffer(64)
        base, size = ctypes.c_uint64(), ctypes.c_uint64()
        rc = self._export(dptr, buf, ctypes.byref(base), ctypes.byref(size))
        if rc != 0:
            raise self._fail("exporting device memory", rc)
        return buf.raw[:64], base.value, size.value

    def open(self, handle: bytes) -> tuple[int, int]:
        """Map an allocation exported by another process: (base, size), cached per handle."""
        if len(handle) != 64:
            raise IpcError(f"an IPC handle is 64 bytes, got {len(handle)}")
        if handle in self._opened:
            return self._opened[handle]
        base, size = ctypes.c_uint64(), ctypes.c_uint64()
        rc = self._open(handle, ctypes.byref(base), ctypes.byref(size))
        if rc != 0:
            raise self._fail("opening an IPC handle", rc)
        self._opened[handle] = (base.value, size.value)
        return self._opened[handle]

    def close_all(self) -> None:
        for base, _ in self._opened.values():
            self._close(base)
        self._opened.clear()


@dataclass(frozen=True, slots=True)
class TensorDesc:
    handle: bytes
    offset: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @staticmethod
    def parse(d: Any) -> TensorDesc:
        """Validate a descriptor that came from an untrusted process."""
        if not isinstance(d, dict):
            raise IpcError(f"a tensor descriptor is an object, got {type(d).__name__}")
        try:
            handle = bytes.fromhex(str(d["handle"]))
            offset = int(d["offset"])
            dtype = str(d["dtype"])
            shape = tuple(int(s) for s in d["shape"])
            stride = tuple(int(s) for s in d["stride"])
        except (KeyError, TypeError, ValueError) as e:
            raise IpcError(f"malformed tensor descriptor: {e}") from e
        if dtype not in ITEMSIZE:
            raise IpcError(f"unsupported output dtype {dtype!r}")
        if len(shape) != len(stride) or any(s < 0 for s in shape) or any(s < 0 for s in stride):
            raise IpcError("descriptor with a negative or mismatched shape/stride")
        if offset < 0 or len(shape) > 16:
            raise IpcError("descriptor out of range")
        return TensorDesc(handle, offset, dtype, shape, stride)

    def extent_bytes(self) -> int:
        if any(s == 0 for s in self.shape):
            return 0
        last = sum((n - 1) * st for n, st in zip(self.shape, self.stride, strict=True))
        return (last + 1) * ITEMSIZE[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return {"handle": self.handle.hex(), "offset": self.offset, "dtype": self.dtype,
                "shape": list(self.shape), "stride": list(self.stride)}


def describe(lib: IpcLib, t: Any, cache: dict[int, tuple[bytes, int]] | None = None) -> dict[str, Any]:
    """The descriptor of a CUDA tensor (sender side); an empty tensor has no memory to
    share and travels as its shape alone."""
    if t.numel() == 0:
        return TensorDesc(b"", 0, dtype_name(t.dtype), tuple(t.shape), tuple(t.stride())).to_dict()
    ptr = int(t.data_ptr())
    hit = None
    if cache is not None:
        for base, (h, size) in cache.items():
            if base <= ptr < base + size:
                hit = (h, base)
                break
    if hit is None:
        h, base, size = lib.export(ptr)
        if cache is not None:
            cache[base] = (h, size)
        hit = (h, base)
    return TensorDesc(hit[0], ptr - hit[1], dtype_name(t.dtype), tuple(t.shape),
                      tuple(t.stride())).to_dict()


class _CudaArray:
    """Just enough of ``__cuda_array_interface__`` for torch to wrap raw device memory."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 2, "strides": None}


def tensor_at(ptr: int, desc: TensorDesc) -> Any:
    """A torch tensor viewing ``desc`` at device address ``ptr`` (the allocation base plus
    the descriptor's offset); the memory stays owned by whoever allocated it."""
    import torch

    itemsize = ITEMSIZE[desc.dtype]
    n = desc.extent_bytes()
    if n == 0:
        return torch.empty(desc.shape, dtype=getattr(torch, desc.dtype), device="cuda")
    pad = (-n) % itemsize
    raw = torch.as_tensor(_CudaArray(ptr + desc.offset, n + pad), device="cuda")
    typed = raw.view(getattr(torch, desc.dtype))
    return typed.as_strided(desc.shape, desc.stride)


def open_tensor(lib: IpcLib, desc: TensorDesc) -> Any:
    if desc.extent_bytes() == 0:
        return tensor_at(0, desc)
    base, size = lib.open(desc.handle)
    if desc.offset + desc.extent_bytes() > size:
        raise IpcError(f"descriptor reaches {desc.offset + desc.extent_bytes()} bytes into an "
                       f"allocation of {size}")
    return tensor_at(base, desc)
