"""``cutegen search/resume --gpus/--backend/--ray-address/--compile-ahead`` with fake pools."""

from __future__ import annotations

import dataclasses
import importlib.util

import click
import pytest
from click.testing import CliRunner

import cutegen.api as api
import cutegen.cli.search as cli_search
from cutegen.codegen.pool import parse_gpus
from cutegen.errors import ConfigError, GPURequiredError
from cutegen.search import SearchParams
from cutegen.search.storage import SqliteStorage


@pytest.fixture
def cli():
    @click.group()
    def group() -> None:
        """test group"""

    cli_search.register(group)
    return group


@pytest.fixture
def pools(monkeypatch, h):
    """Replace the real pool; records (devices, pool) per run."""
    made = []

    def make(task, settings, run_dir, baselines, devices):
        gpus = parse_gpus(devices.gpus, count=lambda: 2) or (None,)
        pool, _ = h.fake_pool(task, run_dir, devices=len(gpus))
        made.append((dataclasses.asdict(devices), pool))
        return pool

    monkeypatch.setattr(api, "make_pool", make)
    monkeypatch.setattr(api, "require_gpu", lambda what: None)
    monkeypatch.setattr("cutegen.codegen.pool.visible_gpu_count", lambda: 2)
    return made


def invoke(cli, args):
    return CliRunner().invoke(cli, args, catch_exceptions=True)


def test_parse_gpus():
    assert parse_gpus(None) is None and parse_gpus("  ") is None
    assert parse_gpus("all", count=lambda: 3) == (0, 1, 2)
    assert parse_gpus("0,2") == (0, 2) and parse_gpus("1") == (1,)
    for bad in ("0,0", "x", "-1", ","):
        with pytest.raises(ConfigError):
            parse_gpus(bad)
    with pytest.raises(GPURequiredError):
        parse_gpus("all", count=lambda: 0)


def test_help_documents_the_device_options(cli):
    for cmd in ("search", "resume"):
        out = invoke(cli, [cmd, "--help"]).output
        for opt in ("--gpus", "--backend", "--ray-address", "--compile-ahead"):
            assert opt in out, (cmd, opt)
    assert "all|0,2" in invoke(cli, ["search", "--help"]).output


def test_search_on_two_gpus_then_resume(cli, pools, task, big_seed, tmp_path):
    db = str(tmp_path / "s" / "c.db")
    r = invoke(cli, ["search", str(task.path), "--seed-candidate", str(big_seed), "--gpus",
                     "all", "--max-evals", "12", "--run", "r", "--db", db])
    assert r.exit_code == 0, r.output
    (devices, pool), = pools
    assert devices == {"backend": "local", "gpus": "all", "ray_address": None,
                       "compile_ahead": 0, "count": 2}
    s = SqliteStorage(db)
    run = s.get_run("r")
    assert run.config.settings["devices"] == devices
    assert SearchParams.from_dict(run.config.settings["params"]).parallel == 2
    assert len(s.get_results(run.id)) == 12 and pool.capacity == 2
    s.close()
    # resume on one GPU: the stored window (2 in flight) is kept for an exact resume
    r = invoke(cli, ["resume", "r", "--db", db, "--gpus", "0", "--max-evals", "20"])
    assert r.exit_code == 0, r.output
    assert pools[-1][0]["gpus"] == "0" and pools[-1][0]["count"] == 1
    s = SqliteStorage(db)
    assert len(s.get_results(s.get_run("r").id)) == 20
    s.close()
    r = invoke(cli, ["resume", "r", "--db", db, "--max-evals", "22"])  # stored devices
    assert r.exit_code == 0, r.output
    assert pools[-1][0] == devices


def test_contradictions_are_config_errors(cli, pools, task, big_seed, tmp_path):
    base = ["search", str(task.path), "--seed-candidate", str(big_seed), "--max-evals", "2",
            "--db", str(tmp_path / "c.db")]
    for extra, msg in ((["--gpu", "1", "--gpus", "0,1"], "not both"),
                       (["--compile-only", "--gpus", "0,1"], "needs no GPU"),
                       (["--ray-address", "auto"], "--backend ray"),
                       (["--gpus", "0,0"], "distinct")):
        r = invoke(cli, [*base, *extra])
        assert r.exit_code != 0 and isinstance(r.exception, ConfigError), extra
        assert msg in str(r.exception)
    assert pools == []


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="ray is installed")
def test_ray_backend_without_ray_says_how_to_install(cli, task, big_seed, tmp_path):
    r = invoke(cli, ["search", str(task.path), "--seed-candidate", str(big_seed), "--backend",
                     "ray", "--max-evals", "2", "--db", str(tmp_path / "c.db")])
    assert isinstance(r.exception, ConfigError) and ".[ray]" in str(r.exception)


def test_compile_ahead_widens_the_window(cli, pools, task, big_seed, tmp_path):
    db = str(tmp_path / "c.db")
    r = invoke(cli, ["search", str(task.path), "--seed-candidate", str(big_seed), "--gpus",
                     "0,1", "--compile-ahead", "2", "--max-evals", "6", "--run", "r",
                     "--db", db])
    assert r.exit_code == 0, r.output
    s = SqliteStorage(db)
    params = SearchParams.from_dict(s.get_run("r").config.settings["params"])
    assert params.parallel == 4 and pools[0][0]["compile_ahead"] == 2
    s.close()
