"""run_tool: the one subprocess helper. Timeouts kill the whole process group."""

from __future__ import annotations

import os
import sys
import time

from cutegen.profilers import find_tool, run_tool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(pid, 0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_success_captures_output_and_status(tmp_path):
    r = run_tool([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                 timeout_s=30, cwd=tmp_path)
    assert (r.returncode, r.stdout.strip(), r.stderr.strip()) == (3, "out", "err")
    assert not r.ok and not r.timed_out and "status 3" in r.describe()


def test_timeout_kills_the_child_and_its_grandchildren(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = (f"import subprocess, sys, time\n"
            f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
            f"time.sleep(600)\n")
    t0 = time.monotonic()
    r = run_tool([sys.executable, "-c", code], timeout_s=1.5, grace_s=1.0)
    assert r.timed_out and r.returncode is None and "timed out" in r.describe()
    assert time.monotonic() - t0 < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_child_that_ignores_sigterm_is_killed(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
    t0 = time.monotonic()
    r = run_tool([sys.executable, "-c", code], timeout_s=1.0, grace_s=0.5)
    assert r.timed_out and time.monotonic() - t0 < 10


def test_output_is_capped_to_its_tail():
    r = run_tool([sys.executable, "-c", "print('x' * 100000 + 'END')"], timeout_s=30, cap_bytes=1000)
    assert r.truncated and len(r.stdout) <= 1000 and r.stdout.strip().endswith("END")


def test_missing_binary_is_a_start_error(tmp_path):
    r = run_tool([str(tmp_path / "nope")], timeout_s=5)
    assert r.returncode is None and r.start_error and "could not start" in r.describe()


def test_env_is_the_complete_environment():
    r = run_tool([sys.executable, "-c", "import os; print(sorted(k for k in os.environ if k.startswith('CG_')))"],
                 timeout_s=30, env={"CG_ONLY": "1", "PATH": os.environ.get("PATH", "")})
    assert r.stdout.strip() == "['CG_ONLY']"


def test_find_tool_on_a_given_path_and_in_candidates(tmp_path):
    exe = tmp_path / "mytool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert find_tool("mytool", path=str(tmp_path)) == str(exe)
    assert find_tool("mytool", path="/nonexistent", candidates=[str(tmp_path / "my*")]) == str(exe)
    assert find_tool("mytool", path="/nonexistent") is None
