"""Several of a bench's task searches at once, one per GPU (``cutegen bench --jobs N``).

Each task's search is the run the serial bench would make (:func:`open_job_run` over the
library entry point, from the same settings), but in a child process of its own
(``python -m cutegen.cli.bench_jobs SPEC.json``) pinned to one GPU. Children
write their runs into the bench's store (SQLite in WAL mode with a busy timeout: separate
runs, so they never contend for the same rows) and their output into one log file each;
the parent only schedules, reports progress, and reads the results back from the store.

A child that fails before its search could record anything leaves its message in
``SPEC.json.result`` (``{"error": ...}``), so the bench's table can say why.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutegen import api
from cutegen.search import Budget
from cutegen.settings import RunSettings

#: How a child is started (a seam for tests, which run children in-process).
Spawn = Callable[[Path, Path], Any]


@dataclass
class Job:
    """One task of the bench to search in a child.

    Attributes:
        index: position in the suite (1-based), for progress lines.
        label: the task's label.
        command: "search" (create the run) or "resume".
        kwargs: the run's name, store, settings (or budget) and LLM options (JSON).
        past_s: wall seconds the run used before (a resumed run's wall budget counts them).
    """

    index: int
    label: str
    command: str
    kwargs: dict[str, Any]
    past_s: float = 0.0
    error: str = field(default="", init=False)


def spawn_process(spec: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start ``python -m cutegen.cli.bench_jobs SPEC`` with its output going to ``log``.

    The child gets a session of its own, so a Ctrl-C at the terminal reaches the bench
    only, which passes exactly one SIGINT on (a second one would abort the evaluation in
    flight instead of letting it finish)."""
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "cutegen.cli.bench_jobs", str(spec)],
                                stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_jobs(jobs: Sequence[Job], *, gpus: Sequence[int | None], workdir: Path,
             time_left: Callable[[], float | None], min_task_s: float,
             on_start: Callable[[Job, int | None], None],
             on_done: Callable[[Job], None], on_skip: Callable[[Job], None],
             spawn: Spawn | None = None, poll_s: float = 0.5) -> None:
    """Run ``jobs`` in order, at most one per entry of ``gpus`` at a time.

    A job starts only with at least ``min_task_s`` of ``time_left()`` (None: no limit);
    otherwise ``on_skip`` is called for it and for every job after it. Each job's
    ``kwargs`` get its slot's GPU (``gpu``; ``gpus`` for a resume; nothing for a slot of
    None, as in compile-only benches) and, with a time limit, ``max_minutes`` (the time
    left when it starts, plus the run's past wall time). ``on_done`` runs after a child ends (``job.error`` holds its
    message if it failed). Ctrl-C is passed on: the children stop their searches cleanly
    (each is resumable), then KeyboardInterrupt is raised.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    pending = list(jobs)
    free = list(range(len(gpus)))
    running: dict[int, tuple[Job, Any, Path]] = {}  # slot -> (job, process, spec path)
    try:
        while pending or running:
            while pending and free:
                left = time_left()
                if left is not None and left < min_task_s:
                    for j in pending:
                        on_skip(j)
                    pending.clear()
                    break
                job, slot = pending.pop(0), free.pop(0)
                kwargs = dict(job.kwargs)
                if gpus[slot] is not None:  # resume takes the devices as --gpus
                    kwargs.update({"gpus": str(gpus[slot])} if job.command == "resume"
                                  else {"gpu": gpus[slot]})
                if left is not None:
                    kwargs["max_minutes"] = (left + job.past_s) / 60
                spec = workdir / f"{job.index:03d}-{job.label}.json"
                spec.write_text(json.dumps({"command": job.command, "kwargs": kwargs},
                                           default=str))
                Path(str(spec) + ".result").unlink(missing_ok=True)
                log = spec.with_suffix(".log")
                on_start(job, gpus[slot])
                running[slot] = (job, (spawn or spawn_process)(spec, log), spec)
            for slot, (job, proc, spec) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[slot]
                free.append(slot)
                free.sort()
                job.error = _child_error(spec, code)
                on_done(job)
            if running:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        _stop(p for _, p, _ in running.values())
        raise


def _child_error(spec: Path, code: int) -> str:
    result = Path(str(spec) + ".result")
    if result.is_file():
        try:
            return str(json.loads(result.read_text()).get("error", ""))
        except (OSError, ValueError):
            pass
    if code == 0:
        return ""
    tail = _tail(spec.with_suffix(".log"))
    return f"the search process exited with status {code}" + (f": {tail}" if tail else "")


def _stop(procs: Any, grace_s: float = 120.0) -> None:
    """Ask children to stop (SIGINT: their searches close cleanly), kill the stubborn."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None and hasattr(p, "send_signal"):
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()


def open_job_run(command: str, kwargs: dict[str, Any], llm_config: Any) -> api.SearchRun:
    """The run one task of a bench searches: created from its settings, or resumed with
    its budget; ``gpu`` (search) or ``gpus`` (resume) and ``max_minutes`` of the job slot
    applied. The bench's serial loop and its job processes both call this."""
    max_minutes = kwargs.get("max_minutes")
    if command == "resume":
        budget = Budget.from_dict(kwargs["budget"])
        if max_minutes is not None:
            budget = dataclasses.replace(budget, max_wall_s=max_minutes * 60)
        devices = api.resolve_devices(gpus=kwargs.get("gpus"))
        return api.resume_run(kwargs["name"], db=kwargs["db"], budget=budget, devices=devices,
                              llm_config=llm_config)
    from cutegen.codegen.tasks import resolve_task

    settings = RunSettings.from_dict(kwargs["settings"])
    if kwargs.get("gpu") is not None:
        settings = settings.replace(eval=dataclasses.replace(settings.eval, gpu=kwargs["gpu"]))
    if max_minutes is not None:
        settings = settings.replace(budget=dataclasses.replace(settings.budget,
                                                               max_wall_s=max_minutes * 60))
    kb = kwargs.get("kernelbench")
    task = resolve_task(kwargs.get("task"), kernelbench=kb[0] if kb else None,
                        level=kb[1] if kb else None, problem=kb[2] if kb else None)
    return api.create_run(task, settings, db=kwargs["db"], name=kwargs["name"],
                          llm_config=llm_config)


def run_spec(spec: Path) -> int:
    """The child: create or resume one run as the spec says and search it; 0 when it ran."""
    from cutegen.cli.llm import build_llm_config
    from cutegen.cli.search import search_with_progress
    from cutegen.errors import CuteGenError

    data = json.loads(spec.read_text())
    kwargs = data["kwargs"]
    result = Path(str(spec) + ".result")
    try:
        llm: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                               for k, v in kwargs["llm"].items()}
        run = open_job_run(data["command"], kwargs, build_llm_config(**llm))
        search_with_progress(run, kwargs["db"])
    except CuteGenError as e:
        result.write_text(json.dumps({"error": str(e)}))
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m cutegen.cli.bench_jobs SPEC.json", file=sys.stderr)
        return 2
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return run_spec(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
