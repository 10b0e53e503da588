"""Typed errors.

Two kinds of trouble reach a user of cutegen, and they are kept apart (Optuna's
FAIL-versus-StorageInternalError split):

* A candidate's own fault (does not compile, wrong answer, crash, hang, cheats) is *data*:
  it becomes an :class:`~cutegen.codegen.evaluation.Evaluation` with a verdict, is stored,
  and is fed back to the rewriters. It never raises.
* Everything else raises a :class:`CuteGenError` subclass: a bad task file, a broken store,
  a missing GPU, an LLM endpoint that stays down, a plugin that breaks the contract.

``cutegen.cli`` is the only place that turns these into exit codes.
"""

from __future__ import annotations


class CuteGenError(Exception):
    """Base class of every error cutegen raises on purpose."""

    exit_code = 1


class ConfigError(CuteGenError):
    """A configuration value or command-line combination is invalid."""

    exit_code = 2


class TaskError(CuteGenError):
    """A task file cannot be used: syntax error, missing functions, reference that raises..."""

    exit_code = 2


class CandidateError(CuteGenError):
    """A candidate source cannot even be read (not a file, not UTF-8)."""

    exit_code = 2


class StorageError(CuteGenError):
    """The store cannot be read or written (disk full, read-only, corrupt, wrong schema)."""


class DuplicatedRunError(StorageError):
    """A run with this name already exists and ``load_if_exists`` was not given."""


class RunNotFoundError(StorageError):
    """No run with this name exists in the store."""


class NodeFinishedError(StorageError):
    """An attempt to change a node that is already COMPLETE or FAILED."""


class RunLockedError(StorageError):
    """Another live search session holds this run (one writer per run)."""


class ResumeMismatchError(CuteGenError):
    """A run cannot be resumed because its task file or toolchain changed."""

    exit_code = 3


class InfrastructureError(CuteGenError):
    """The machine, not the candidate, failed: no GPU, driver reset, GPU left busy, disk full.

    Retryable by the scheduler; never recorded as a verdict on a kernel.
    """

    exit_code = 4


class GPURequiredError(InfrastructureError):
    """The command needs an NVIDIA GPU and none is visible."""


class DeviceLostError(InfrastructureError):
    """One device of an evaluation pool failed and was taken out of service; the work it
    held is given back to the scheduler (the search requeues the node).

    Attributes:
        device: the device index (``None`` for a CPU slot).
    """

    def __init__(self, message: str, *, device: int | None = None) -> None:
        super().__init__(message)
        self.device = device


class PluginError(CuteGenError):
    """A plugin broke the contract (two profilers with one name, a bad hook implementation)."""


class LLMError(CuteGenError):
    """The LLM endpoint failed after the allowed retries, or refused the request."""


class RateLimitError(LLMError):
    """The endpoint asked us to wait longer than we are willing to wait."""


class BudgetExceededError(CuteGenError):
    """A hard budget (LLM dollars, evaluations, time) would be exceeded by the next step."""
