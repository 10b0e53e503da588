"""Registers this folder's shared test-data modules under fixed names before any test module
here is imported (pytest loads a folder's conftest first), so every module imports the same
instance and its caches: ``import _cutegen_famdata as fd`` (``_famdata.py``) and
``import _cutegen_gemm_plans as gp`` (``gemm_plans.py``), ``import _cutegen_gpu_cases as
gc`` (``_gpu_cases.py``). The tests run with
``--import-mode=importlib``, so this folder is not on ``sys.path``."""

import importlib.util
import sys
from pathlib import Path


def _register(name: str, filename: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_register("_cutegen_famdata", "_famdata.py")
_register("_cutegen_gemm_plans", "gemm_plans.py")
_register("_cutegen_gpu_cases", "_gpu_cases.py")
