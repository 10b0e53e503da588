"""LLM endpoint configuration and price tables.

:class:`LLMConfig` is the frozen description of one OpenAI-compatible endpoint and of the
limits cutegen holds it to (deadlines, retries, dollars). :func:`config_from_env` is the
only function that reads the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``); every
other piece of the LLM code gets the config passed down.

Prices are dollars per million tokens. :data:`DEFAULT_PRICES` is a starting point, dated
and sourced, and meant to be overridden: prices change, and a local model (vLLM, Ollama)
has whatever price you give it. A ``--max-dollars`` cap on a model without a price is a
:class:`~cutegen.errors.ConfigError`, because it could not be enforced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from cutegen.errors import ConfigError

OPENAI_BASE_URL = "https://api.openai.com/v1"

StructuredMode = Literal["auto", "on", "off"]
TokenParam = Literal["auto", "max_tokens", "max_completion_tokens"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Dollars per million tokens for one model."""

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        if self.input_per_mtok < 0 or self.output_per_mtok < 0:
            raise ConfigError("a price cannot be negative")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollars for a call with these token counts."""
        return (prompt_tokens * self.input_per_mtok
                + completion_tokens * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model name, with where they came from.

    A model matches its exact name first, then the longest name that is a prefix of it
    followed by ``-`` (so ``gpt-4.1-2025-04-14`` takes the price of ``gpt-4.1``, and
    ``gpt-4.1-mini`` keeps its own).
    """

    prices: Mapping[str, ModelPrice]
    as_of: str = ""
    source: str = ""

    def lookup(self, model: str) -> ModelPrice | None:
        if model in self.prices:
            return self.prices[model]
        best = ""
        for name in self.prices:
            if model.startswith(name + "-") and len(name) > len(best):
                best = name
        return self.prices[best] if best else None

    def merged(self, other: PriceTable) -> PriceTable:
        """This table with ``other``'s entries added or replacing ours."""
        return PriceTable({**self.prices, **other.prices},
                          as_of=other.as_of or self.as_of, source=other.source or self.source)


#: Defaults, EDITABLE: list prices of a few OpenAI models as published on
#: https://openai.com/api/pricing/ (standard tier, as of 2025-08). They will go stale;
#: override them with ``--price-file`` or ``--price MODEL=IN/OUT`` rather than trusting them.
DEFAULT_PRICES = PriceTable(
    {
        "gpt-5": ModelPrice(1.25, 10.00),
        "gpt-5-mini": ModelPrice(0.25, 2.00),
        "gpt-5-nano": ModelPrice(0.05, 0.40),
        "gpt-4.1": ModelPrice(2.00, 8.00),
        "gpt-4.1-mini": ModelPrice(0.40, 1.60),
        "gpt-4.1-nano": ModelPrice(0.10, 0.40),
        "gpt-4o": ModelPrice(2.50, 10.00),
        "gpt-4o-mini": ModelPrice(0.15, 0.60),
        "o3": ModelPrice(2.00, 8.00),
        "o4-mini": ModelPrice(1.10, 4.40),
    },
    as_of="2025-08",
    source="https://openai.com/api/pricing/ (editable defaults; verify before relying on them)",
)


def load_price_file(path: str | Path) -> PriceTable:
    """Read a price table from TOML or JSON.

    The file holds ``[models."NAME"]`` tables (TOML) or a ``{"models": {NAME: {...}}}``
    object (JSON), each with ``input_per_mtok`` and ``output_per_mtok``; optional top-level
    ``as_of`` and ``source`` strings say where the numbers came from::

        as_of = "2026-11-01"
        source = "my provider's invoice"
        [models."qwen2.5-coder:32b"]
        input_per_mtok = 0.0
        output_per_mtok = 0.0

    Raises:
        ConfigError: the file is missing, does not parse, or an entry is incomplete.
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read price file {p}: {e}") from e
    try:
        data = json.loads(text) if p.suffix == ".json" else _toml_loads(text)
    except ValueError as e:  # JSONDecodeError and TOMLDecodeError both are ValueErrors
        raise ConfigError(f"price file {p} does not parse: {e}") from e
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict) or not models:
        raise ConfigError(f"price file {p} has no [models.NAME] entries")
    prices: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        try:
            prices[str(name)] = ModelPrice(float(entry["input_per_mtok"]),
                                           float(entry["output_per_mtok"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"price file {p}: model {name!r} needs numeric "
                              "input_per_mtok and output_per_mtok") from e
    return PriceTable(prices, as_of=str(data.get("as_of", "")),
                      source=str(data.get("source", str(p))))


def _toml_loads(text: str) -> dict[str, object]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError as e:
            raise ConfigError("TOML price files need Python >= 3.11 or the tomli package; "
                              "use a .json price file") from e
    return tomllib.loads(text)


def parse_price_option(text: str) -> tuple[str, ModelPrice]:
    """Parse ``MODEL=IN/OUT`` (dollars per million input / output tokens).

    Raises:
        ConfigError: not of that form.
    """
    model, sep, rest = text.rpartition("=")
    inp, slash, out = rest.partition("/")
    try:
        if not (sep and slash and model):
            raise ValueError
        return model, ModelPrice(float(inp), float(out))
    except ValueError as e:
        raise ConfigError(f"--price wants MODEL=IN/OUT dollars per million tokens, "
                          f"e.g. 'gpt-4.1=2/8'; got {text!r}") from e


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """One OpenAI-compatible endpoint and the limits cutegen holds it to.

    Attributes:
        model: model name sent to the endpoint.
        base_url: the endpoint's ``/v1`` URL.
        api_key: bearer token (never printed; local servers accept any string).
        price: dollars per million tokens, or None when unknown.
        max_dollars: hard cap on what this run may spend on the LLM (None = no cap).
        max_tokens: completion-token limit of one call (also the worst case reserved).
        temperature: sampling temperature, None = the server's default.
        stream: ask for a server-sent-event stream (usage requested in the last event).
        structured: "on" sends a JSON-schema ``response_format``; "auto" tries it and
            falls back to fenced code blocks for the rest of the run when the server
            rejects it; "off" never sends it.
        token_param: which request field carries ``max_tokens``; "auto" uses
            ``max_completion_tokens`` for api.openai.com and ``max_tokens`` elsewhere.
        attempt_timeout_s: limit of one HTTP attempt, streaming or not.
        total_timeout_s: overall deadline of one call, all retries and waits included.
        connect_timeout_s: limit of the TCP/TLS connect phase.
        max_attempts: attempts per call, first one included (retries = this - 1).
        backoff_base_s / backoff_max_s: capped exponential backoff with full jitter.
        max_retry_after_s: longest ``Retry-After`` we wait out; longer raises
            :class:`~cutegen.errors.RateLimitError` to the scheduler.
        max_response_bytes: a response body larger than this is cut off and failed.
        max_reply_chars: a reply text longer than this is a parse error.
        concurrency: LLM calls one ``propose`` may have in flight at once.
        repair_rounds: repair turns for a child that does not compile (0 = none).
    """

    model: str
    base_url: str = OPENAI_BASE_URL
    api_key: str = field(default="", repr=False)
    price: ModelPrice | None = None
    max_dollars: float | None = None
    max_tokens: int = 16_000
    temperature: float | None = None
    stream: bool = False
    structured: StructuredMode = "auto"
    token_param: TokenParam = "auto"
    attempt_timeout_s: float = 300.0
    total_timeout_s: float = 900.0
    connect_timeout_s: float = 10.0
    max_attempts: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 60.0
    max_response_bytes: int = 16 * 1024 * 1024
    max_reply_chars: int = 400_000
    concurrency: int = 4
    repair_rounds: int = 2

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("an LLM model name is required (--model)")
        scheme = urlsplit(self.base_url).scheme
        if scheme not in ("http", "https"):
            raise ConfigError(f"LLM base URL must be http(s)://...; got {self.base_url!r}")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if self.max_tokens < 1:
            raise ConfigError("max_tokens must be at least 1")
        if min(self.attempt_timeout_s, self.total_timeout_s, self.connect_timeout_s) <= 0:
            raise ConfigError("LLM timeouts must be positive")
        if self.max_dollars is not None:
            if self.max_dollars < 0:
                raise ConfigError("--max-dollars cannot be negative")
            if self.price is None:
                raise ConfigError(
                    f"--max-dollars cannot be enforced: no price is known for model "
                    f"{self.model!r}. Give one with --price '{self.model}=IN/OUT' (dollars "
                    "per million input/output tokens; 0/0 for a local model) or --price-file.")
        if self.concurrency < 1 or self.repair_rounds < 0:
            raise ConfigError("concurrency must be >= 1 and repair_rounds >= 0")

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or ""

    @property
    def max_tokens_field(self) -> str:
        if self.token_param != "auto":
            return self.token_param
        return "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"


def config_from_env(
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    prices: PriceTable | None = None,
    price: ModelPrice | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: object,
) -> LLMConfig:
    """Build an :class:`LLMConfig` from explicit values, falling back to the environment.

    Reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (and ``CUTEGEN_LLM_MODEL`` for the
    model) from ``env`` (default: ``os.environ``); explicit arguments win. The price is
    ``price`` if given, else looked up in ``prices`` (default :data:`DEFAULT_PRICES`).

    Args:
        model / base_url / api_key: explicit values (None = from the environment).
        prices: the price table to look the model up in.
        price: an explicit price for the model (wins over the table).
        env: the environment mapping to read (tests pass a dict).
        **overrides: any other :class:`LLMConfig` field.

    Raises:
        ConfigError: no model, no API key for api.openai.com, or an invalid field.
    """
    env = os.environ if env is None else env
    model = model or env.get("CUTEGEN_LLM_MODEL", "")
    base_url = (base_url or env.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/")
    key = api_key if api_key is not None else env.get("OPENAI_API_KEY", "")
    host = urlsplit(base_url).hostname or ""
    if not key:
        if host == "api.openai.com":
            raise ConfigError("OPENAI_API_KEY is not set (needed for api.openai.com; "
                              "local servers such as vLLM or Ollama need none)")
        key = "unused"  # vLLM and Ollama accept any key unless configured otherwise
    if price is None and model:
        price = (prices or DEFAULT_PRICES).lookup(model)
    try:
        return LLMConfig(model=model or "", base_url=base_url, api_key=key, price=price,
                         **overrides)  # type: ignore[arg-type]
    except TypeError as e:
        raise ConfigError(f"unknown LLM setting: {e}") from e
