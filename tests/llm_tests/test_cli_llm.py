"""The LLM command-line pieces: the ``@llm_options`` bundle, ``cutegen prompt``,
``cutegen export-traces``, and the pure trace-row builder."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from cutegen._loopback_llm import SAMPLE_CANDIDATE, fenced
from cutegen.cli import llm as cli_llm
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Verdict
from cutegen.codegen.llm import LLMCall, ModelPrice
from cutegen.codegen.llm.traces import TraceNode, trace_rows
from cutegen.errors import ConfigError, StorageError

CLEAN_ENV = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "CUTEGEN_LLM_MODEL": None}


@click.command()
@cli_llm.llm_options
def show(llm_config):
    click.echo(repr(None if llm_config is None else (
        llm_config.model, llm_config.base_url, llm_config.price, llm_config.max_dollars,
        llm_config.total_timeout_s, llm_config.stream, llm_config.structured)))


def invoke(cmd, args, env=None):
    return CliRunner().invoke(cmd, args, env={**CLEAN_ENV, **(env or {})})


def test_llm_options_build_one_config():
    r = invoke(show, ["--model", "qwen", "--base-url", "http://127.0.0.1:8000/v1",
                      "--price", "qwen=0.5/1.5", "--max-dollars", "3", "--llm-timeout", "60",
                      "--llm-stream", "--structured", "off"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == repr(("qwen", "http://127.0.0.1:8000/v1", ModelPrice(0.5, 1.5),
                                     3.0, 60.0, True, "off"))


@click.command()
@click.option("--max-dollars", type=float, default=None)
@cli_llm.llm_options(own_max_dollars=False)
def shared(max_dollars, llm_config):
    click.echo(f"{max_dollars} {llm_config.max_dollars}")


def test_llm_options_can_share_the_commands_max_dollars():
    r = invoke(shared, ["--model", "m", "--base-url", "http://127.0.0.1:1/v1",
                        "--price", "m=1/1", "--max-dollars", "2.5"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "2.5 2.5"


def test_export_traces_without_a_store_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(cli_llm.export_traces, ["r1", "--db", str(tmp_path / "none.db")])
    assert isinstance(r.exception, StorageError) and "no store" in str(r.exception)


def test_llm_options_without_a_model_give_no_config():
    assert invoke(show, []).output.strip() == "None"


def test_llm_options_read_the_environment():
    r = invoke(show, [], env={"CUTEGEN_LLM_MODEL": "gpt-4.1", "OPENAI_API_KEY": "sk-x"})
    assert "'gpt-4.1', 'https://api.openai.com/v1'" in r.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--max-dollars", "1"], "needs an LLM"),
    (["--model", "mystery", "--base-url", "http://127.0.0.1:1/v1", "--max-dollars", "1"],
     "cannot be enforced"),
    (["--model", "gpt-4.1"], "OPENAI_API_KEY"),
    (["--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--price", "m=cheap"], "--price"),
])
def test_llm_option_errors_are_config_errors(args, needle):
    r = invoke(show, args)
    assert isinstance(r.exception, ConfigError) and needle in str(r.exception)


def test_price_file_option(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text('[models."local"]\ninput_per_mtok = 0\noutput_per_mtok = 0\n')
    r = invoke(show, ["--model", "local", "--base-url", "http://127.0.0.1:1/v1",
                      "--price-file", str(f), "--max-dollars", "0"])
    assert r.exit_code == 0 and "ModelPrice(input_per_mtok=0.0" in r.output


def test_prompt_command_prints_the_prompt_and_the_worst_case():
    r = invoke(cli_llm.prompt_cmd, ["softmax_fp32", "--model", "gpt-4.1", "--system"],
               env={"OPENAI_API_KEY": "sk-x"})
    assert r.exit_code == 0, r.output
    assert "CuTe DSL primer" in r.output and 'task "softmax_fp32"' in r.output
    assert "worst case of one call at gpt-4.1's price: $" in r.output


def test_every_command_has_help():
    group = click.Group()
    cli_llm.register(group)
    assert set(group.commands) == {"export-traces", "prompt"}
    for cmd in group.commands.values():
        r = CliRunner().invoke(cmd, ["--help"])
        assert r.exit_code == 0 and len(cmd.help or "") > 40


# -- export-traces ------------------------------------------------------------------------
def _call(response: str, outcome: str = "ok") -> LLMCall:
    return LLMCall(call_id="c", attempt=1, purpose="initial", model="m", base_url="u",
                   system="S", prompt="P", response=response, outcome=outcome)


@pytest.fixture
def filled_store(tmp_path):
    """A store with one run, one evaluated node, and two recorded LLM calls for it."""
    from cutegen.codegen.rewriters.base import Move
    from cutegen.search import NodeState
    from cutegen.search.storage import RunConfig, SqliteStorage, StoreCallRecorder

    path = tmp_path / "store.db"
    store = SqliteStorage(path)
    run = store.create_run("r1", RunConfig("toy", "toy.py", "0" * 64))
    recorder = StoreCallRecorder(store, run.id)
    recorder.record(_call(fenced()))
    recorder.record(_call("no code", "parse_error"))
    cand = CandidateSource(SAMPLE_CANDIDATE, "llm:m")
    node = store.add_node(run.id, parent_id=None, source=cand,
                          move=Move("llm_initial", "x", cost="expensive"))
    store.set_node_state(node.id, NodeState.RUNNING, expected=NodeState.WAITING)
    store.record_evaluation(node.id, Evaluation(cand.sha256, "0" * 64, Stage.COMPILE,
                                                Verdict.COMPILED), reward=0.25)
    store.close()
    return path


def test_export_traces_writes_json_lines(filled_store, tmp_path):
    out = tmp_path / "traces.jsonl"
    r = CliRunner().invoke(cli_llm.export_traces,
                           ["r1", "--db", str(filled_store), "-o", str(out)])
    assert r.exit_code == 0, r.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["candidate"] == SAMPLE_CANDIDATE and row["reward"] == 0.25
    assert row["verdict"] == "compiled" and row["prompt"] == "P" and row["system"] == "S"
    assert row["run"] == "r1" and row["task"] == "toy"
    r = CliRunner().invoke(cli_llm.export_traces, ["r1", "--db", str(filled_store),
                                                   "--all-calls"])
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["outcome"] for x in lines] == ["ok", "parse_error"]
    assert lines[1]["candidate"] is None


def test_export_traces_of_an_unknown_run(filled_store):
    from cutegen.errors import RunNotFoundError

    r = CliRunner().invoke(cli_llm.export_traces, ["nope", "--db", str(filled_store)])
    assert isinstance(r.exception, RunNotFoundError)


def test_trace_rows_drop_samples_unless_asked():
    from cutegen.codegen.evaluation import Timing

    code = SAMPLE_CANDIDATE
    ev = Evaluation(CandidateSource(code).sha256, "t", Stage.BENCHMARK, Verdict.CORRECT,
                    timing=Timing.from_samples([1.0, 2.0, 3.0]))
    node = TraceNode(7, code, ev, 0.5)
    (row,) = trace_rows([_call(fenced())], [node])
    assert "samples_us" not in row["evaluation"]["timing"] and row["node_id"] == 7
    (row,) = trace_rows([_call(fenced())], [node], keep_samples=True)
    assert list(row["evaluation"]["timing"]["samples_us"]) == [1.0, 2.0, 3.0]
