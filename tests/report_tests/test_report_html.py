"""``cutegen report``: the HTML page from a fake search, checked by parsing it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

import cutegen.search.report.svg as report_svg
from cutegen.errors import StorageError
from cutegen.search.report.data import build_run_report, find_source, progress_points
from cutegen.search.report.html import render_html, write_report
from cutegen.search.storage import SqliteStorage


class Page(HTMLParser):
    """Collects what the tests look at: headings, tags, svgs, tree nodes, text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.h2: list[str] = []
        self.svgs: list[str] = []
        self.tree_circles = 0
        self.urls: list[str] = []
        self.text: list[str] = []
        self._in: list[str] = []
        self._svg_class = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._in.append(tag)
        if tag == "svg":
            self._svg_class = a.get("class") or ""
            self.svgs.append(self._svg_class)
        if tag == "circle" and self._svg_class == "tree":
            self.tree_circles += 1
        for k in ("src", "href"):
            if a.get(k):
                self.urls.append(a[k] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._svg_class = ""
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "h2":
            self.h2.append(data)
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(self.text)


def _report(fr, **kw):
    s = SqliteStorage(fr.db)
    try:
        run = s.get_run(fr.name)
        return s, run, build_run_report(s, run, **kw)
    finally:
        s.close()


def test_page_structure(fake_run, tmp_path):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    path = write_report(s, run, tmp_path, db=str(fake_run.db))
    best = s.get_best_node(run.id)
    n_nodes = s.n_nodes(run.id)
    ev = s.get_evaluation(best.id)
    source = s.get_source(best.id)
    rejected = [d for d in s.get_best_history(run.id) if not d.accepted]
    s.close()
    assert path == tmp_path / f"{fake_run.name}.html"
    page = Page(path.read_text(encoding="utf-8"))
    assert page.tags["html"] == 1 and page.tags["style"] == 1
    assert "script" not in page.tags and "img" not in page.tags and "link" not in page.tags
    assert page.urls == []  # self-contained: nothing fetched from anywhere
    heads = " | ".join(page.h2)
    for h in ("Progress", "Search tree", f"Best kernel: node {best.id}", "LLM", "Environment"):
        assert h in heads
    assert page.svgs.count("chart") == 2 and page.svgs.count("tree") == 1
    assert page.svgs.count("strip") == 2  # candidate and eager (the fake has no compile)
    assert page.tree_circles >= n_nodes + 1  # one per node, plus the ring on the best
    text = page.all_text
    assert f"{ev.speedup_eager:.3f}×" in text and "95% CI" in text
    assert "gated best vs PyTorch eager" in text
    assert "loads are 64-bit: widen to 128-bit" in text  # the hint finding's summary
    # guidance in its own table; each profiler's raw findings folded into a <details>
    html = path.read_text(encoding="utf-8")
    guidance = html.split("<h3>Profile findings along the path</h3>")[1].split("<details>")[0]
    assert "loads are 64-bit: widen to 128-bit" in guidance and "ldg_max_bits" not in guidance
    assert f"node {best.id}, sass: 3 findings</summary>" in html  # the hook's one + two
    assert "<td>sass.ldg_max_bits</td><td>64</td><td>global loads 64-bit</td>" in html
    # the challengers the gate kept out are listed too, with why (folded)
    assert rejected and (f"Gate decisions that kept the best ({len(rejected)} challengers"
                         in html)
    assert rejected[-1].reason in text
    assert "ncu: unavailable" in text
    assert "fake-model $0.0123" in text and "$0.01" in text  # LLM section and card
    assert "FakeGPU" in text and "2.0-fake" in text  # versions from the run row
    assert source.splitlines()[1] in text  # the best kernel's source, escaped
    assert "correct" in text and "static / compile error" in text


def test_progress_points_track_the_gated_best(fake_run):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    pts = progress_points(s, run.id)
    history = s.get_best_history(run.id)
    accepted = [d.node_id for d in history if d.accepted]
    results = s.get_results(run.id)
    s.close()
    assert [p.index for p in pts] == list(range(1, len(results) + 1))
    assert [p.best_node for p in pts if p.best_node is not None][-1] == accepted[-1]
    gpu = [p.gpu_minutes for p in pts]
    assert gpu == sorted(gpu) and gpu[-1] > 0
    total = sum(r.gpu_seconds for r in results) + sum(d.retime_seconds for d in history)
    assert pts[-1].gpu_minutes == pytest.approx(total / 60)  # re-timing counts too


def test_missing_candidate_files_degrade_gracefully(tmp_path, make_run):
    fr = make_run(tmp_path / "s", evals=8)
    shutil.rmtree(tmp_path / "s" / fr.name)  # the store was copied without its run folder
    s = SqliteStorage(fr.db)
    path = write_report(s, s.get_run(fr.name), tmp_path / "x.html")
    s.close()
    text = Page(path.read_text()).all_text
    assert "not available" in text and "source is not available here" in text
    assert "Search tree" in text  # the rest of the page is still there


def test_seed_from_its_file_when_the_run_folder_is_gone(tmp_path, make_run):
    """A seed's source is found again by its sha256 among the run's seed files."""
    fr = make_run(tmp_path / "s", evals=6)
    shutil.rmtree(tmp_path / "s" / fr.name)
    s = SqliteStorage(fr.db)
    run, seed = s.get_run(fr.name), s.get_node(1)
    text, note = find_source(s, run, seed)
    assert text is None and "not available" in note
    cfg = run.config  # runs made by `cutegen search` list their seed files in the settings
    run = replace(run, config=replace(cfg, settings={"seed_candidates": [
        {"path": str(fr.seed_path)}]}))
    text, note = find_source(s, run, seed)
    s.close()
    assert text == fr.seed_path.read_text() and "same sha256" in note


def test_report_on_a_given_node_and_errors(fake_run, tmp_path):
    s, run, r = _report(fake_run, node_id=2)
    assert r.node.id == 2 and [st.node_id for st in r.path][-1] == 2
    html = render_html(r)
    assert "Node 2" in html
    s = SqliteStorage(fake_run.db)
    with pytest.raises(StorageError):
        build_run_report(s, run, node_id=10_000)
    s.close()


def test_run_without_a_best(tmp_path, make_run):
    fr = make_run(tmp_path / "s", evals=5, compile_only=True, extras=False)
    _, _, r = _report(fr)
    assert r.node is None and r.verdicts.get("compiled")
    text = Page(render_html(r)).all_text
    assert "No best yet" in text and "no timed evaluation yet" in text


@pytest.mark.parametrize("dot", [False, pytest.param(True, marks=pytest.mark.tool("dot"))])
def test_tree_layouts(fake_run, monkeypatch, dot):
    if not dot:
        monkeypatch.setattr(report_svg.shutil, "which", lambda name: None)
    _, _, r = _report(fake_run)
    html = render_html(r)
    assert ("Layout: graphviz dot" in html) == dot
    assert ("Layout: layered" in html) == (not dot)


def test_cli_report(fake_run, tmp_path):
    from click.testing import CliRunner

    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    r = CliRunner().invoke(cli, ["report", fake_run.name, "--db", str(fake_run.db), "-o",
                                 str(tmp_path / "out")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = Path(r.stdout.strip())
    assert out == tmp_path / "out" / f"{fake_run.name}.html" and out.is_file()
    r = CliRunner().invoke(cli, ["report", "nope", "--db", str(fake_run.db)])
    assert "no run named 'nope'" in str(r.exception)
    r = CliRunner().invoke(cli, ["report", "x", "--db", str(tmp_path / "none.db")])
    assert "no store at" in str(r.exception)


@pytest.mark.parametrize("dot", [False, pytest.param(True, marks=pytest.mark.tool("dot"))])
def test_empty_run(tmp_path, monkeypatch, dot):
    from cutegen.search.storage import RunConfig

    if not dot:
        monkeypatch.setattr(report_svg.shutil, "which", lambda name: None)
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("e", RunConfig("t", str(tmp_path / "gone.py"), "abc"))
    text = Page(write_report(s, run, tmp_path).read_text()).all_text
    s.close()
    assert "No best yet" in text and "evaluations" in text and "not recorded" in text


def test_eager_in_tf32_is_a_row_and_a_fact_beside_eager(fake_run, tmp_path, best_with_tf32):
    """A conv task's evaluation with eager timed both ways: the timing table has a row for
    cuDNN in TF32 and the speed-up line says which eager it is against."""
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    with_tf32 = best_with_tf32(s, run, 5.0)
    path = write_report(s, run, tmp_path, db=str(fake_run.db))
    want = with_tf32(s.get_best_node(run.id).id).speedup_eager_tf32
    s.close()
    page = Page(path.read_text(encoding="utf-8"))
    assert page.svgs.count("strip") == 3  # candidate, eager, eager in TF32
    text = page.all_text
    assert "PyTorch eager, cuDNN in TF32" in text
    assert f"vs torch's default, cuDNN in TF32: {want:.3f}×" in text
