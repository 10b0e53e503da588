"""Where a search evaluates: ``--gpus``, ``--backend``, ``--ray-address``, ``--compile-ahead``.

The options of ``cutegen search`` and ``cutegen resume`` (the commands live in
:mod:`cutegen.cli.search`); what they mean is :func:`cutegen.api.resolve_devices` and
:class:`cutegen.settings.DeviceSettings`, stored with the run so a resume without these
options evaluates where the run did.
"""

from __future__ import annotations

from typing import Any

import click


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
                          "actor per GPU (needs `pip install -e \".[ray]\"` from a checkout).  "
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
