"""``RunSettings``: everything that shapes one search run, in one frozen, typed record.

A run's settings are written once, when the run is created, and stored with it
(``RunConfig.settings`` holds :meth:`RunSettings.to_dict`), so ``resume`` rebuilds exactly
the same search. Every default lives here (or in the records it nests: ``SearchParams``,
``Budget``, ``EvalOptions``), nowhere else: the CLI's options start from these values.

What is *not* a setting: the API key (read from the environment when the LLM client is
built, never stored), live objects (stores, evaluators, clients), and the task itself
(``RunConfig`` names its file and hash).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.llm.config import OPENAI_BASE_URL
from cutegen.errors import ConfigError
from cutegen.search import Budget, SearchParams

if TYPE_CHECKING:
    from cutegen.codegen.llm import LLMConfig

RewriterKind = Literal["builtin", "llm", "mixed"]
ProfilingMode = Literal["auto", "force", "off"]
Backend = Literal["local", "ray"]

REWRITERS: tuple[str, ...] = ("builtin", "llm", "mixed")


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``d`` that are fields of the dataclass ``cls`` (stored settings of an
    older or newer cutegen may carry keys this one does not know)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True, slots=True)
class ProfilingSettings:
    """Delayed profiling.

    Attributes:
        mode: "auto" (correct nodes at ``depth`` or deeper; in compile-only runs every
            compiled node, since SASS is all there is to look at), "force" (every
            successful node) or "off".
        depth: the depth from which correct nodes are profiled (seeds are depth 1).
        timeout_s: seconds allowed for each profiler on one node.
        only: load only these profiler plugins (comma list), None for all.
        disabled: profiler plugins not to load (comma list).
    """

    mode: ProfilingMode = "auto"
    depth: int = 3
    timeout_s: float = 120.0
    only: str | None = None
    disabled: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "force", "off"):
            raise ConfigError(f"profiling mode must be auto, force or off, not {self.mode!r}")
        if self.depth < 1 or self.timeout_s <= 0:
            raise ConfigError("profiling depth must be >= 1 and its timeout positive")

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> ProfilingSettings:
        return ProfilingSettings(**_known(ProfilingSettings, d or {"mode": "off"}))


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """What of the LLM configuration is stored with a run (never the key).

    Attributes:
        model: the model name.
        base_url: the OpenAI-compatible endpoint.
        max_dollars: the hard cap on spending (None: no cap).
        max_tokens: the completion-token limit of one call.
    """

    model: str
    base_url: str = OPENAI_BASE_URL
    max_dollars: float | None = None
    max_tokens: int = 16_000

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> LLMSettings | None:
        return None if not d else LLMSettings(**_known(LLMSettings, d))

    @staticmethod
    def from_config(cfg: LLMConfig | None) -> LLMSettings | None:
        """The storable part of a client configuration (None for None)."""
        if cfg is None:
            return None
        return LLMSettings(model=cfg.model, base_url=cfg.base_url, max_dollars=cfg.max_dollars,
                           max_tokens=cfg.max_tokens)


@dataclass(frozen=True, slots=True)
class DeviceSettings:
    """Where a run evaluates when it uses more than one evaluator.

    Attributes:
        backend: "local" (this host's GPUs) or "ray" (one actor per GPU of a Ray cluster).
        gpus: "all", indices like "0,2" (local), or a number of actors (ray); None: the
            stored or default choice.
        ray_address: the Ray cluster to join (None: start a one-host cluster).
        compile_ahead: CPU workers that compile each candidate before it takes a GPU.
        count: the number of GPU evaluators, counted when the settings were made.
    """

    backend: Backend = "local"
    gpus: str | None = None
    ray_address: str | None = None
    compile_ahead: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.backend not in ("local", "ray"):
            raise ConfigError(f"backend must be local or ray, not {self.backend!r}")
        if self.backend == "local" and self.ray_address:
            raise ConfigError("--ray-address needs --backend ray")
        if self.compile_ahead < 0 or self.count < 1:
            raise ConfigError("compile_ahead must be >= 0 and count >= 1")

    @property
    def width(self) -> int:
        """Evaluations in flight: one per device plus one per compile slot."""
        return self.count + self.compile_ahead

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> DeviceSettings | None:
        return None if not d else DeviceSettings(**_known(DeviceSettings, d))


@dataclass(frozen=True, slots=True)
class SeedCandidate:
    """A user's candidate file a run starts from, with the hash it had then (a resume
    refuses a changed file)."""

    path: str
    sha256: str


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Everything that shapes one search run. Frozen; stored with the run.

    Attributes:
        seed: the run seed: the same seed, task and results give the same tree.
        rewriter: who proposes candidates: "builtin" (no LLM), "llm" or "mixed".
        params: the search's hyperparameters; None takes the rewriter's defaults
            (:meth:`SearchParams.for_rewriter`).
        budget: when the run stops (evaluations, wall time, GPU time, dollars).
        eval: how candidates are evaluated (compile-only, arch, timeouts, GPU ...).
        profiling: delayed profiling.
        llm: the LLM endpoint (required by the "llm" and "mixed" rewriters).
        devices: several evaluators at once (None: one local evaluator).
        seed_candidates: the user's candidate files to start from, besides the bundled
            seeds.
    """

    seed: int = 0
    rewriter: RewriterKind = "builtin"
    params: SearchParams = cast(SearchParams, None)
    budget: Budget = field(default_factory=Budget)
    eval: EvalOptions = field(default_factory=EvalOptions)
    profiling: ProfilingSettings = field(default_factory=ProfilingSettings)
    llm: LLMSettings | None = None
    devices: DeviceSettings | None = None
    seed_candidates: tuple[SeedCandidate, ...] = ()

    def __post_init__(self) -> None:
        if self.rewriter not in REWRITERS:
            raise ConfigError(f"rewriter must be one of {', '.join(REWRITERS)}, "
                              f"not {self.rewriter!r}")
        if self.params is None:
            object.__setattr__(self, "params", SearchParams.for_rewriter(self.rewriter))
        if self.rewriter != "builtin" and self.llm is None:
            raise ConfigError(f"--rewriter {self.rewriter} needs a model: give --model (and "
                              "--base-url for a local server); see `cutegen search --help`")
        if self.devices is not None and self.eval.compile_only:
            raise ConfigError("--compile-only needs no GPU: drop --gpus, --backend and "
                              "--compile-ahead")
        object.__setattr__(self, "seed_candidates", tuple(self.seed_candidates))

    def replace(self, **changes: Any) -> RunSettings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; the shape stored in ``RunConfig.settings`` since the first schema."""
        d: dict[str, Any] = {
            "seed": self.seed,
            "rewriter": self.rewriter,
            "params": self.params.to_dict(),
            "budget": self.budget.to_dict(),
            "eval_options": dataclasses.asdict(self.eval),
            "profiling": dataclasses.asdict(self.profiling),
            "llm": None if self.llm is None else dataclasses.asdict(self.llm),
            "seed_candidates": [dataclasses.asdict(s) for s in self.seed_candidates],
        }
        if self.devices is not None:
            d["devices"] = dataclasses.asdict(self.devices)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any], *, seed: int | None = None) -> RunSettings:
        """Rebuild settings stored by :meth:`to_dict` (also those of older runs, whose
        dict had no "seed": give the run's ``seed``).

        Raises:
            ConfigError: the stored settings cannot be used by this cutegen.
        """
        try:
            return RunSettings(
                seed=int(d.get("seed", 0) if seed is None else seed),
                rewriter=d.get("rewriter", "builtin"),
                params=SearchParams.from_dict(d.get("params") or {}),
                budget=Budget.from_dict(d.get("budget") or {}),
                eval=EvalOptions(**_known(EvalOptions, d.get("eval_options") or {})),
                profiling=ProfilingSettings.from_dict(d.get("profiling")),
                llm=LLMSettings.from_dict(d.get("llm")),
                devices=DeviceSettings.from_dict(d.get("devices")),
                seed_candidates=tuple(SeedCandidate(str(s["path"]), str(s["sha256"]))
                                      for s in d.get("seed_candidates") or ()))
        except (TypeError, ValueError, KeyError) as e:
            raise ConfigError(f"the run's stored settings cannot be read: {e}") from e


__all__ = ["REWRITERS", "DeviceSettings", "LLMSettings", "ProfilingSettings", "RunSettings",
           "SeedCandidate"]
