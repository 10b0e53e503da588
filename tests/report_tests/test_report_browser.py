"""The report in a real browser: headless Chromium renders it and takes a screenshot.

Install it with ``apt-get install -y chromium``; without it the test is skipped. The
screenshot is left in the test's temporary folder for a person to look at.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile

import pytest

from cutegen.search.report.html import write_report
from cutegen.search.storage import SqliteStorage

WIDTH, HEIGHT = 1400, 3000


@pytest.mark.tool("chromium")
def test_report_renders_in_chromium(fake_run, tmp_path):
    s = SqliteStorage(fake_run.db)
    page = write_report(s, s.get_run(fake_run.name), tmp_path / "report.html")
    s.close()
    shot = tmp_path / "report.png"
    profile = tempfile.mkdtemp(prefix="cutegen-chromium-")
    try:
        p = subprocess.run(
            [shutil.which("chromium") or "chromium", "--headless", "--no-sandbox",
             "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--screenshot={shot}",
             f"--window-size={WIDTH},{HEIGHT}", page.as_uri()],
            capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.is_file(), p.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (WIDTH, HEIGHT)
    # a blank page of this size compresses to a few kB; charts, tree and tables do not
    assert len(data) > 60_000, f"the screenshot looks empty ({len(data)} bytes): {shot}"
