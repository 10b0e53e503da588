"""The candidate worker's audit hook: its file and import policy (pure), and the hook itself
in a child process, trying what an attacker would (denied, reported, not undone by
monkeypatching)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cutegen.codegen.eval.sandbox import import_denial, normalise, open_denial


def test_normalise_is_pure_string_work():
    assert normalise("../../proc/self/mem", "/tmp/w") == "/proc/self/mem"
    assert normalise("/dev/../proc//self/./mem", "/") == "/proc/self/mem"
    assert normalise("a/b", "/tmp/w/") == "/tmp/w/a/b"


@pytest.mark.parametrize("path,mode,flags,denied", [
    ("/proc/self/mem", "rb", None, True),
    ("/proc/1234/environ", "r", None, True),
    ("/proc/thread-self/maps", "r", None, True),
    ("/proc/cpuinfo", "r", None, False),
    ("/proc/self/status", "r", None, False),
    ("/dev/nvidiactl", "rb", None, True),
    ("/tmp/w/out.txt", "w", None, False),
    ("/tmp/elsewhere.txt", "w", None, True),
    ("/tmp/elsewhere.txt", None, os.O_WRONLY | os.O_CREAT, True),
    ("/tmp/elsewhere.txt", "r", None, False),
    ("/dev/null", "w", None, False),
    ("/runs/r1/store.db", "r", None, True),
    ("../w2/x", "r", None, False),
])
def test_open_policy(path, mode, flags, denied):
    why = open_denial(path, mode, flags, cwd="/tmp/w", write_roots=("/tmp/w",),
                      read_denied=("/runs/r1",))
    assert bool(why) == denied, why


def test_import_policy():
    assert import_denial("cupy", lambda n: False)
    assert import_denial("torch.utils.cpp_extension", lambda n: False)
    assert import_denial("numba.cuda", lambda n: False)
    assert not import_denial("numba.cuda", lambda n: True)  # already imported: no event anyway
    assert not import_denial("math", lambda n: False)


_CHILD = r'''
import ctypes, gc, json, os, socket, sys
from cutegen.codegen.eval.sandbox import install_audit_hook
scratch, audit_fd = sys.argv[1], int(sys.argv[2])
os.chdir(scratch)
install_audit_hook(audit_fd=audit_fd, scratch=scratch, read_denied=["/etc/cutegen-secret"])
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "allowed"
    except PermissionError as e:
        results[name] = "denied" if "cutegen sandbox" in str(e) else f"other: {e}"
    except Exception as e:
        results[name] = f"error: {type(e).__name__}"
attempt("write_scratch", lambda: open("ok.txt", "w").write("x"))
attempt("write_outside", lambda: open("/tmp/cutegen-sandbox-escape.txt", "w"))
attempt("proc_mem", lambda: open("/proc/self/mem", "rb"))
attempt("proc_maps_relative", lambda: open("../../../../../../proc/self/maps"))
attempt("dlopen", lambda: ctypes.CDLL(None))
attempt("string_at", lambda: ctypes.string_at(id(results), 8))
attempt("from_address", lambda: ctypes.c_char.from_address(id(results)))
attempt("gc_objects", lambda: gc.get_objects())
attempt("fork", lambda: os.fork())
attempt("kill_other", lambda: os.kill(1, 0))
attempt("kill_self", lambda: os.kill(os.getpid(), 0))
attempt("socket", lambda: socket.socket())
attempt("import_cupy", lambda: __import__("cupy"))
attempt("import_cpp_extension", lambda: __import__("torch.utils.cpp_extension"))
# monkeypatching what a naive hook would call changes nothing
os.getcwd = lambda: "/"
import builtins, posixpath
import cutegen.codegen.eval.sandbox as sb
posixpath.normpath = lambda p: "/tmp/w/ok"
sb.open_denial = lambda *a, **k: ""
sb.normalise = lambda p, c: "/tmp/w/ok"
builtins.any = lambda *a: False
attempt("write_outside_after_patch", lambda: open("/tmp/cutegen-sandbox-escape2.txt", "w"))
class Sneaky(str):
    def startswith(self, *a):
        return True
attempt("str_subclass_path", lambda: open(Sneaky("/proc/self/mem"), "rb"))
import pathlib
attempt("pathlib_proc_mem", lambda: open(pathlib.Path("/proc/self/mem"), "rb"))
attempt("dlopen_nvml_allowed", lambda: ctypes.CDLL("libnvidia-ml.so.1"))
print(json.dumps(results))
'''


def _run_child(tmp_path):
    r, w = os.pipe()
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), str(w)], pass_fds=(w,),
                          capture_output=True, text=True, timeout=120)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        audit = f.read().decode().splitlines()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), audit


def test_the_hook_denies_reports_and_cannot_be_patched_away(tmp_path):
    results, audit = _run_child(tmp_path)
    allowed = {"write_scratch", "kill_self"}
    for name, outcome in results.items():
        if name == "dlopen_nvml_allowed":  # not denied by the hook (absent here: an OSError)
            assert outcome == "allowed" or outcome.startswith("error"), outcome
            allowed.add(name)
            continue
        want = "allowed" if name in allowed else "denied"
        assert outcome == want, (name, outcome)
    assert not os.path.exists("/tmp/cutegen-sandbox-escape.txt")
    assert len(audit) == len(results) - len(allowed)  # every denial reported once
    assert any("/proc/self/mem" in a for a in audit)


_TAMPER = r'''
import os, sys, tempfile
from cutegen.codegen.eval.sandbox import install_audit_hook
scratch, audit_fd, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.chdir(scratch)
install_audit_hook(audit_fd=audit_fd, scratch=scratch, read_denied=[])
if how == "close":
    os.close(audit_fd)
elif how == "replace":  # another file on the pipe's descriptor: lines would land there
    fd = os.open(os.path.join(scratch, "decoy.txt"), os.O_WRONLY | os.O_CREAT)
    os.dup2(fd, audit_fd)
try:
    open("/proc/self/mem", "rb")
except PermissionError:
    pass
print("survived")
'''


@pytest.mark.parametrize("how", ["close", "replace", "none"])
def test_a_denial_that_cannot_be_reported_ends_the_process(tmp_path, how):
    """Closing the audit pipe (or putting a file on its descriptor) and then trying something
    denied ends the worker with AUDIT_LOST_EXIT, which the parent reads as forbidden."""
    from cutegen.codegen.eval.sandbox import AUDIT_LOST_EXIT

    r, w = os.pipe()
    proc = subprocess.run([sys.executable, "-c", _TAMPER, str(tmp_path), str(w), how],
                          pass_fds=(w,), capture_output=True, text=True, timeout=120)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        audit = f.read().decode().splitlines()
    if how == "none":
        assert proc.returncode == 0 and "survived" in proc.stdout, proc.stderr[-2000:]
        assert len(audit) == 1 and "/proc/self/mem" in audit[0]
    else:
        assert proc.returncode == AUDIT_LOST_EXIT, (proc.returncode, proc.stderr[-2000:])
        assert "survived" not in proc.stdout
        assert not (tmp_path / "decoy.txt").exists() or not (tmp_path / "decoy.txt").read_text()
