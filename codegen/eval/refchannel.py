"""The parent's end of the trusted reference worker: typed requests, replies, failures.

One :class:`ReferenceChannel` serves one evaluator (one task): it starts
``python -m cutegen.codegen.eval.refworker``, sends JSON requests and waits for the reply
frame with the same id. A reference worker that dies, hangs or reports a task fault
raises (:class:`~cutegen.errors.TaskError` for the task's own faults,
:class:`~cutegen.errors.InfrastructureError` for the machine's); candidates never reach
this process.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cutegen.codegen.eval.process import WorkerProcess
from cutegen.errors import InfrastructureError, TaskError


class ReferenceChannel:
    """Requests to the reference worker of one task."""

    def __init__(self, *, task_path: Path, task_name: str, mode: str, scratch: Path,
                 env: Callable[[str], dict[str, str]], log_cap: int,
                 native_lib: Path | None, cupti: Path | None) -> None:
        self.task_path, self.task_name, self.mode = task_path, task_name, mode
        self.scratch = scratch
        self._env, self._log_cap = env, log_cap
        self._native_lib, self._cupti = native_lib, cupti
        self.proc: WorkerProcess | None = None
        self.info: dict[str, Any] | None = None
        self.gpu_name = ""
        self._req = 0

    def set_native(self, lib: Path, cupti: Path | None) -> None:
        """The native library (IPC, observer) the worker loads on a GPU."""
        self._native_lib, self._cupti = lib, cupti

    # -- lifetime -----------------------------------------------------------------------
    def start(self, *, hidden: bool) -> dict[str, Any]:
        """Start the worker and load the task (once); returns the task's description."""
        if self.info is not None:
            return self.info
        self.scratch.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "cutegen.codegen.eval.refworker", "--mode", self.mode,
                "--task", str(self.task_path), "--scratch", str(self.scratch)]
        if self._native_lib is not None:
            argv += ["--native-lib", str(self._native_lib), "--cupti", str(self._cupti or "")]
        self.proc = WorkerProcess(argv, env=self._env(secrets.token_hex(16)),
                                  cwd=str(self.scratch), log_cap=self._log_cap)
        ready = self._wait("ready", timeout=300)
        self.gpu_name = ready.get("gpu", "")
        self.info = self.call({"op": "load", "hidden": hidden, "seed_init": secrets.randbits(62)},
                              timeout=900)
        return self.info

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.send_line({"op": "quit"})
            self.proc.kill()
            self.proc = None
        self.info = None

    # -- requests -----------------------------------------------------------------------
    def send(self, req: Mapping[str, Any]) -> int:
        if self.proc is None:
            raise InfrastructureError("the reference worker is not running")
        self._req += 1
        if not self.proc.send_line({**req, "id": self._req}):
            raise InfrastructureError("the reference worker is gone")
        return self._req

    def result(self, rid: int, *, timeout: float) -> dict[str, Any]:
        msg = self._wait("reply", timeout=timeout, rid=rid)
        if "error" in msg and len(msg) <= 4:
            raise InfrastructureError(f"reference worker error: {msg['error']}\n"
                                      f"{msg.get('traceback', '')}")
        return msg

    def call(self, req: Mapping[str, Any], *, timeout: float) -> dict[str, Any]:
        return self.result(self.send(req), timeout=timeout)

    def _wait(self, kind: str, *, timeout: float, rid: int | None = None) -> dict[str, Any]:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            ev = self.proc.next_event(deadline - time.monotonic())
            if ev is None:
                tail = self.proc.log_tail()
                self._drop()
                raise InfrastructureError(f"the reference worker did not answer within "
                                          f"{timeout:.0f} s" + (f"\n{tail}" if tail else ""))
            what, msg, _ = ev
            if what != "msg":
                tail = self.proc.log_tail()
                why = self.proc.exit_description()
                self._drop()
                if "SIGKILL" in why:
                    raise TaskError(f"the reference worker for {self.task_name} was killed "
                                    f"({why}): most likely out of host memory while running the "
                                    f"task's reference\n{tail}")
                raise TaskError(f"the reference worker for {self.task_name} died ({what}, {why}); "
                                f"the task's own code may have crashed it\n{tail}")
            if msg["t"] == "task_error":
                raise TaskError(f"{self.task_path}: {msg['message']}")
            if msg["t"] == "infra":
                raise InfrastructureError(msg["message"])
            if msg["t"] == kind and (rid is None or msg.get("id") == rid):
                return msg

    def _drop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        self.proc, self.info = None, None
