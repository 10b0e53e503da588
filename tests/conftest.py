"""Markers: ``gpu`` tests skip without a CUDA device, ``tool(name)`` tests without the binary."""

from __future__ import annotations

import functools
import importlib.util
import shutil

import pytest


@functools.cache
def _has_cuda() -> bool:
    if shutil.which("nvidia-smi") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") and not _has_cuda():
            item.add_marker(pytest.mark.skip(
                reason="no CUDA device (run `pytest -m gpu` on the GPU machine)"))
        for m in item.iter_markers("tool"):
            if shutil.which(m.args[0]) is None:
                item.add_marker(pytest.mark.skip(reason=f"{m.args[0]} not on PATH"))
