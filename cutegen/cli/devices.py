"""Where a search evaluates: ``--gpus``, ``--backend``, ``--ray-address``, ``--compile-ahead``.

Parsing and composition for ``cutegen search`` and ``cutegen resume`` (the commands live in
:mod:`cutegen.cli.search`). The choice is stored on the run as ``settings["devices"]`` so a
resume without these options evaluates where the run did; the number of evaluations in
flight is ``SearchParams.parallel``, stored with the run's parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cutegen.errors import ConfigError


def device_options(f: Any) -> Any:
    """The options that pick the evaluation devices (shared by search and resume)."""
    for opt in reversed([
        click.option("--gpus", default=None, metavar="all|0,2",
                     help="Evaluate on several GPUs at once: 'all' or indices like 0,2 "
                          "(one evaluator per GPU, one evaluation in flight per GPU; results "
                          "are told in claim order, so the tree does not depend on timing). "
                          "With --backend ray: 'all' GPUs of the cluster, or a number of GPU "
                          "actors. Default: one GPU, as --gpu picks."),
        click.option("--backend", type=click.Choice(["local", "ray"]), default=None,
                     help="local: this host's GPUs. ray: the GPUs of a Ray cluster, one "
                          "actor per GPU (needs `pip install 'cutegen[ray]'`).  "
                          "[default: local]"),
        click.option("--ray-address", default=None,
                     help="The Ray cluster to join: 'auto' when this host is a node of it "
                          "(`ray start`), or HEAD_IP:6379; without it --backend ray starts "
                          "a one-host cluster."),
        click.option("--compile-ahead", type=click.IntRange(0, None), default=None,
                     help="CPU workers that compile each candidate before it takes a GPU; "
                          "a candidate that fails to compile never reaches one.  [default: 0]"),
    ]):
        f = opt(f)
    return f


def resolve(*, gpus: str | None, backend: str | None, ray_address: str | None,
            compile_ahead: int | None, gpu: int | None, compile_only: bool,
            stored: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The run's device settings: the options given, else what the run stored, else None
    (one local evaluator, as before). Counts devices now ("all") to size the window.

    Raises:
        ConfigError: contradictory options.
        GPURequiredError: ``--gpus all`` on a host without a GPU.
    """
    given = any(v is not None for v in (gpus, backend, ray_address, compile_ahead))
    if not given:
        return stored
    if gpu is not None and gpus is not None:
        raise ConfigError("give --gpu or --gpus, not both")
    if compile_only:
        raise ConfigError("--compile-only needs no GPU: drop --gpus, --backend and "
                          "--compile-ahead")
    base = dict(stored or {})
    dev = {"backend": backend or base.get("backend", "local"),
           "gpus": gpus if gpus is not None else base.get("gpus"),
           "ray_address": ray_address if ray_address is not None else base.get("ray_address"),
           "compile_ahead": (compile_ahead if compile_ahead is not None
                             else int(base.get("compile_ahead", 0)))}
    if dev["backend"] == "local" and dev["ray_address"]:
        raise ConfigError("--ray-address needs --backend ray")
    dev["count"] = len(_local_gpus(dev, gpu)) if dev["backend"] == "local" else _ray_count(dev)
    return dev


def width(dev: dict[str, Any] | None) -> int:
    """Evaluations in flight for these devices: one per device plus one per compile slot."""
    if not dev:
        return 1
    return int(dev["count"]) + int(dev.get("compile_ahead", 0))


def _local_gpus(dev: dict[str, Any], gpu: int | None) -> tuple[int | None, ...]:
    from cutegen.codegen.pool import parse_gpus

    got = parse_gpus(dev["gpus"])
    return got if got is not None else (gpu,)


def _ray_count(dev: dict[str, Any]) -> int:
    spec = dev["gpus"]
    if spec is not None and spec.strip().lower() != "all":
        try:
            n = int(spec)
        except ValueError:
            raise ConfigError("with --backend ray, --gpus is 'all' or a number of GPU "
                              "actors (Ray places them)") from None
        if n < 1:
            raise ConfigError("--gpus must be at least 1")
        return n
    from cutegen.codegen.ray_backend import cluster_gpus

    n = cluster_gpus(dev["ray_address"])
    if n < 1:
        from cutegen.errors import GPURequiredError

        raise GPURequiredError(f"the Ray cluster at {dev['ray_address'] or 'this host'} "
                               "offers no GPU")
    return n


def make_pool(task: Any, options: Any, run_dir: Path, storage: Any, dev: dict[str, Any]
              ) -> Any:
    """The evaluator for a multi-device run (tests replace this function with fakes).

    Raises:
        GPURequiredError: no GPU visible (local backend).
        ConfigError: ray missing.
    """
    from cutegen.codegen.pool import make_compile_ahead
    from cutegen.search.storage import StoreBaselineCache

    local = dev["backend"] != "ray"
    if local:
        from cutegen.codegen.backend import require_gpu

        require_gpu("searching (verifying and timing candidates)")
    baselines = StoreBaselineCache(storage)
    n_ahead = int(dev.get("compile_ahead", 0))
    ahead = make_compile_ahead(task, options, run_dir, workers=n_ahead) if n_ahead else None
    try:
        if not local:
            from cutegen.codegen.ray_backend import make_ray_pool

            return make_ray_pool(task, options, run_dir, actors=_ray_count(dev),
                                 address=dev["ray_address"], baseline_cache=baselines,
                                 compile_ahead=ahead)
        from cutegen.codegen.pool import GpuPool

        return GpuPool(task, options, run_dir, gpus=_local_gpus(dev, options.gpu),
                       baseline_cache=baselines, compile_ahead=ahead)
    except BaseException:
        if ahead is not None:
            ahead.close()
        raise
