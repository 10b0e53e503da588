"""The audit pipe's end: closed by the worker's exit, or by the candidate while it lives on.

Found on the H200 (2026-12-02): with four evaluations side by side, an honest reduction was
called ``suspicious`` because the result pipe's reader stamped the worker's last message
("bye") after the audit pipe's reader stamped the end that the worker's exit caused. The end
is now judged from the process, not from the order in which two threads woke up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cutegen.codegen.eval import candidate_run
from cutegen.codegen.eval.candidate_run import AuditReader


def _child(code: str, audit_w: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code.replace("FD", str(audit_w))],
                            stdout=subprocess.PIPE, pass_fds=(audit_w,))


def test_exit_right_after_the_last_message_is_not_an_early_close():
    r, w = os.pipe()
    proc = _child("import os\nos.write(FD, b'denied: open /etc/shadow\\n')\n"
                  "os.write(1, b'bye\\n')\nos._exit(0)\n", w)
    os.close(w)
    reader = AuditReader(r, lambda: proc.poll() is not None)
    time.sleep(0.3)  # a result reader that is slow to wake, as on a loaded host
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"bye\n"
    t_bye = time.monotonic_ns()
    assert not reader.closed_early()
    # the order of the two stamps is what the old rule compared: it called this early
    assert reader.closed_at is not None and reader.closed_at < t_bye
    assert reader.lines == ["denied: open /etc/shadow"]
    proc.wait()


def test_closing_the_pipe_while_the_process_lives_on_is_early(monkeypatch):
    monkeypatch.setattr(candidate_run, "EXIT_GRACE_S", 0.3)
    r, w = os.pipe()
    proc = _child("import os, time\nos.close(FD)\ntime.sleep(1.5)\nos._exit(0)\n", w)
    os.close(w)
    reader = AuditReader(r, lambda: proc.poll() is not None)
    assert reader.closed_early()
    assert proc.poll() is None  # decided while the process was still running
    proc.wait()


def test_an_open_pipe_is_not_early_and_the_wait_is_bounded(monkeypatch):
    monkeypatch.setattr(candidate_run, "EXIT_GRACE_S", 0.2)
    r, w = os.pipe()
    reader = AuditReader(r, lambda: False)
    t0 = time.monotonic()
    assert not reader.closed_early(timeout=0.2)
    assert time.monotonic() - t0 < 2.0
    os.close(w)  # then it ends and no process exit follows
    assert reader.closed_early()
