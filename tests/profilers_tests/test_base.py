"""The contract's values: Finding, ProfileReport, ProfileTarget."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutegen.profilers import Finding, ProfileReport, ProfileTarget, Status, artifact_paths


@pytest.mark.parametrize("key, value, summary", [
    ("", 1, ""), ("has space", 1, ""), ("k", 1, "two\nlines"), ("k", float("nan"), ""),
])
def test_bad_findings_are_refused(key, value, summary):
    with pytest.raises(ValueError):
        Finding(key, value, summary)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}])
def test_finding_values_are_json_scalars(value):
    with pytest.raises(TypeError):
        Finding("k", value)


def test_report_round_trip_and_status_coercion():
    r = ProfileReport("ncu", "ok", (Finding("hint.x", 3, "do x"), Finding("a.b", "s")),  # type: ignore[arg-type]
                      Path("p/ncu.ncu-rep"), None, 1.5)
    assert r.status is Status.OK and r.ok and r.get("hint.x") == 3 and r.get("zzz") is None
    assert ProfileReport.from_dict(r.to_dict()) == r
    with pytest.raises(ValueError):
        ProfileReport("ncu", "great")  # type: ignore[arg-type]


def test_child_env(tmp_path, monkeypatch):
    assert ProfileTarget("c", tmp_path).child_env() is None
    monkeypatch.setenv("CG_PARENT", "1")
    inherited = ProfileTarget("c", tmp_path).child_env(EXTRA="2")
    assert inherited is not None and inherited["CG_PARENT"] == "1" and inherited["EXTRA"] == "2"
    explicit = ProfileTarget("c", tmp_path, env={"PATH": "/x"}).child_env(EXTRA="2")
    assert explicit == {"PATH": "/x", "EXTRA": "2"}
    assert ProfileTarget("c", tmp_path, env={"PATH": "/x"}).search_path == "/x"


def test_artifact_paths_by_suffix(tmp_path):
    arts = {"f.sm_90a.cubin": "artifacts/ab/f.sm_90a.cubin", "f.sass": "artifacts/ab/f.sass",
            "log": "artifacts/ab/worker.log"}
    cubin, sass, ptx = artifact_paths(arts, tmp_path)
    assert cubin == tmp_path / "artifacts/ab/f.sm_90a.cubin" and sass == tmp_path / "artifacts/ab/f.sass"
    assert ptx is None
