"""LLM commands and options: ``cutegen export-traces``, ``cutegen prompt``, and the shared
``@llm_options`` bundle that ``cutegen search`` attaches.

``@llm_options`` adds ``--model``, ``--base-url``, ``--max-dollars``, ``--llm-timeout``,
``--price-file``, ``--price``, ``--max-tokens``, ``--llm-stream`` and ``--structured``, and
hands the wrapped command one ``llm_config: LLMConfig | None`` argument instead (None when
no model is given: the search then runs the built-in rewriter alone). The environment is
read only there (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``CUTEGEN_LLM_MODEL``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click

from cutegen.cli.options import db_option
from cutegen.errors import ConfigError, StorageError

_LLM_KEYS = ("model", "base_url", "max_dollars", "llm_timeout", "price_file", "price",
             "max_tokens", "llm_stream", "structured")


def _llm_option_list(*, with_max_dollars: bool = True) -> list[Callable[[Any], Any]]:
    options = [
        click.option("--model", default=None, metavar="NAME",
                     help="LLM model name; enables the LLM rewriter (env CUTEGEN_LLM_MODEL)."),
        click.option("--base-url", default=None, metavar="URL",
                     help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 for vLLM "
                          "or http://localhost:11434/v1 for Ollama (env OPENAI_BASE_URL; "
                          "default https://api.openai.com/v1). The key is read from "
                          "OPENAI_API_KEY."),
        click.option("--max-dollars", type=click.FloatRange(min=0), default=None,
                     help="Hard cap on LLM spending for the run; a call whose worst case "
                          "could pass it is not sent. Needs a known price for the model."),
        click.option("--llm-timeout", type=click.FloatRange(min=1), default=900.0,
                     show_default=True,
                     help="Overall deadline in seconds for one LLM call, retries included."),
        click.option("--price-file", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="TOML or JSON price table ([models.NAME] input_per_mtok / "
                          "output_per_mtok, dollars per million tokens)."),
        click.option("--price", multiple=True, metavar="MODEL=IN/OUT",
                     help="A model's price in dollars per million input/output tokens, e.g. "
                          "'gpt-4.1=2/8' or 'qwen2.5-coder:32b=0/0'. Repeatable."),
        click.option("--max-tokens", type=click.IntRange(min=256), default=16_000,
                     show_default=True, help="Completion-token limit of one LLM call."),
        click.option("--llm-stream/--no-llm-stream", default=False, show_default=True,
                     help="Stream LLM replies (server-sent events)."),
        click.option("--structured", type=click.Choice(["auto", "on", "off"]), default="auto",
                     show_default=True,
                     help="Ask for JSON-schema output; 'auto' falls back to fenced code "
                          "blocks when the server rejects it."),
    ]
    if not with_max_dollars:
        options.pop(2)  # --max-dollars comes from the command's own option
    return options


def build_llm_config(*, model: str | None, base_url: str | None, max_dollars: float | None,
                     llm_timeout: float, price_file: str | None, price: Iterable[str],
                     max_tokens: int, llm_stream: bool, structured: str,
                     env: dict[str, str] | None = None, sends: bool = True) -> Any:
    """The :class:`~cutegen.codegen.llm.LLMConfig` the options describe, or None without
    a model.

    Raises:
        ConfigError: a bad price, a cap without a price, no key for api.openai.com.
    """
    from cutegen.codegen.llm import DEFAULT_PRICES, config_from_env, load_price_file
    from cutegen.codegen.llm.config import PriceTable, parse_price_option

    environ = dict(os.environ) if env is None else env
    if not sends:  # nothing is sent (`cutegen prompt`): no key needed
        environ.setdefault("OPENAI_API_KEY", "not-needed-nothing-is-sent")
    model = model or environ.get("CUTEGEN_LLM_MODEL")
    if not model:
        if max_dollars is not None:
            raise ConfigError("--max-dollars needs an LLM: give --model")
        return None
    table = DEFAULT_PRICES
    if price_file:
        table = table.merged(load_price_file(price_file))
    if price:
        table = table.merged(PriceTable(dict(parse_price_option(p) for p in price),
                                        source="--price"))
    return config_from_env(model=model, base_url=base_url, prices=table, env=environ,
                           max_dollars=max_dollars, total_timeout_s=llm_timeout,
                           attempt_timeout_s=min(300.0, llm_timeout), max_tokens=max_tokens,
                           stream=llm_stream, structured=structured)


def llm_options(fn: Callable[..., Any] | None = None, *,
                own_max_dollars: bool = True, sends: bool = True) -> Any:
    """Decorator: add the LLM options; the command receives ``llm_config`` instead.

    With ``own_max_dollars=False`` the bundle leaves ``--max-dollars`` out and reads the
    command's own ``max_dollars`` parameter (e.g. the search's budget option) without
    consuming it, so one flag sets both the budget and the LLM's hard cap::

        @budget_options                      # defines --max-dollars
        @llm_options(own_max_dollars=False)
        def search(..., max_dollars, llm_config): ...
    """
    keys = _LLM_KEYS if own_max_dollars else tuple(k for k in _LLM_KEYS if k != "max_dollars")

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            opts = {k: kwargs.pop(k) for k in keys}
            if not own_max_dollars:
                opts["max_dollars"] = kwargs.get("max_dollars")
            kwargs["llm_config"] = build_llm_config(**opts, sends=sends)
            return f(*args, **kwargs)

        for opt in reversed(_llm_option_list(with_max_dollars=own_max_dollars)):
            wrapper = opt(wrapper)
        return wrapper

    return decorate(fn) if fn is not None else decorate


def _write_atomic(path: Path, lines: Iterable[str]) -> int:
    from cutegen.search.storage import write_atomic

    text = list(lines)
    write_atomic(path, "".join(text).encode("utf-8"))  # mode as the umask says, not 0600
    return len(text)


def _trace_nodes(storage: Any, run_id: int) -> list[Any]:
    from cutegen.codegen.llm.traces import TraceNode

    rewards = {r.node_id: r.reward for r in storage.get_results(run_id)}
    return [TraceNode(n.id, storage.get_source(n.id), storage.get_evaluation(n.id),
                      rewards.get(n.id)) for n in storage.get_nodes(run_id)]


@click.command("export-traces")
@click.argument("run_name", metavar="RUN")
@db_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write JSON lines here (atomically) instead of stdout.")
@click.option("--all-calls", is_flag=True,
              help="Also export calls that produced no candidate (failures).")
@click.option("--samples", is_flag=True, help="Keep raw timing samples in the evaluations.")
def export_traces(run_name: str, db: str, output: str | None, all_calls: bool,
                  samples: bool) -> None:
    """Write (prompt, response, candidate, evaluation, reward) JSON lines of RUN.

    One line per LLM call of the run that led to a candidate in the tree: the prompt and
    the raw response, the candidate source, its Evaluation and its reward. For people who
    train kernel-writing models.

    \b
    Example:
      cutegen export-traces softmax-1 -o traces.jsonl
    """
    from cutegen.codegen.llm.traces import trace_rows
    from cutegen.search.storage import SqliteStorage

    if not Path(db).is_file():
        raise StorageError(f"no store at {db} (--db picks another)")
    storage = SqliteStorage(db)
    try:
        run = storage.get_run(run_name)
        rows = trace_rows(storage.get_llm_calls(run.id), _trace_nodes(storage, run.id),
                          run=run.name,
                          task=run.config.task_name, all_calls=all_calls,
                          keep_samples=samples)
        lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        if output is None:
            n = 0
            for line in lines:
                sys.stdout.write(line)
                n += 1
        else:
            n = _write_atomic(Path(output), lines)
    finally:
        storage.close()
    click.echo(f"exported {n} trace(s) of run {run_name!r}", err=True)


@click.command("prompt")
@click.argument("task")
@click.option("--focus", default="simple", show_default=True,
              help="Focus hint key of the initial prompt (see codegen/prompts/focus.md).")
@click.option("--system/--no-system", "with_system", default=False,
              help="Also print the system message (primer, contract, answer format).")
@llm_options(sends=False)
def prompt_cmd(task: str, focus: str, with_system: bool, llm_config: Any) -> None:
    """Print the initial-generation prompt for TASK, and its worst-case cost to stderr.

    Nothing is sent. Use it to see what the LLM is told, and what one call may cost at
    --model's price (estimated prompt tokens + --max-tokens).
    """
    from cutegen.codegen.llm import estimate_tokens
    from cutegen.codegen.prompting import focus_hints, initial_prompt
    from cutegen.codegen.tasks import resolve_task

    hints = {h.key: h for h in focus_hints("initial")}
    if focus not in hints:
        raise ConfigError(f"no initial focus hint {focus!r}; try one of {sorted(hints)}")
    p = initial_prompt(resolve_task(task), focus=hints[focus])
    if with_system:
        click.echo(p.system)
        click.echo("\n---\n")
    click.echo(p.user)
    tokens = estimate_tokens(p.system, p.user)
    note = f"about {tokens:,} prompt tokens (conservative estimate)"
    if llm_config is not None and llm_config.price is not None:
        worst = llm_config.price.cost(tokens, llm_config.max_tokens)
        note += f"; worst case of one call at {llm_config.model}'s price: ${worst:.4f}"
    click.echo(note, err=True)


def register(cli: click.Group) -> None:
    """Attach this module's commands to the ``cutegen`` group."""
    cli.add_command(export_traces)
    cli.add_command(prompt_cmd)
