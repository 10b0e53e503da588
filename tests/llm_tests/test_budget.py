"""F8: the dollar cap. A call whose worst case could pass it is refused before it is sent;
the ledger is derived from the recorded calls, so it survives a restart; every attempt,
retries included, is charged. Also prices and configuration errors."""

from __future__ import annotations

import json

import pytest

from cutegen._loopback_llm import error, fenced, reply
from cutegen.codegen.llm import (
    DEFAULT_PRICES,
    CostLedger,
    InMemoryCallRecorder,
    JsonlCallRecorder,
    LLMCall,
    LLMRequest,
    ModelPrice,
    config_from_env,
    estimate_tokens,
    extract_candidate,
    load_price_file,
    parse_price_option,
)
from cutegen.codegen.llm.store_adapter import StoreCallRecorder
from cutegen.errors import BudgetExceededError, ConfigError

REQ = LLMRequest("system", "user prompt")
PRICE = ModelPrice(1.0, 2.0)  # $ per million tokens (the make_client default)


def worst_case(max_tokens: int) -> float:
    return PRICE.cost(estimate_tokens(REQ.system, REQ.prompt), max_tokens)


def spent_call(usd: float) -> LLMCall:
    return LLMCall(call_id="old", attempt=1, purpose="rewrite", model="fake-model",
                   base_url="http://127.0.0.1/v1", system="", prompt="", cost_usd=usd,
                   cost_basis="usage")


def test_f8_at_cap_minus_epsilon_the_next_call_is_refused_before_sending(server, make_client):
    cap = 1.0
    rec = InMemoryCallRecorder([spent_call(cap - 1e-9)])
    client, _ = make_client(rec, max_dollars=cap, max_tokens=1000)
    server.push(reply(fenced()))
    with pytest.raises(BudgetExceededError, match="was not sent"):
        client.complete(REQ, extract=extract_candidate)
    assert server.requests == []
    assert len(rec.calls) == 1 and client.ledger.reserved_usd() == 0.0


def test_f8_a_call_whose_worst_case_fits_is_sent(server, make_client):
    cap = 1.0
    rec = InMemoryCallRecorder([spent_call(cap - worst_case(1000))])
    client, _ = make_client(rec, max_dollars=cap, max_tokens=1000)
    server.push(reply(fenced(), usage=(10, 10)))
    assert client.complete(REQ, extract=extract_candidate).ok
    assert rec.spent_usd() <= cap


def test_f8_retries_are_charged(server, make_client):
    client, rec = make_client(max_dollars=10.0, max_tokens=1000)
    server.push(error(500), error(503), reply(fenced(), usage=(1000, 500)))
    assert client.complete(REQ, extract=extract_candidate).ok
    costs = [(c.outcome, c.cost_basis, c.cost_usd) for c in rec.calls]
    reserved = worst_case(1000)
    assert costs == [("server_error", "reserved", pytest.approx(reserved)),
                     ("server_error", "reserved", pytest.approx(reserved)),
                     ("ok", "usage", pytest.approx(PRICE.cost(1000, 500)))]
    assert rec.spent_usd() == pytest.approx(2 * reserved + PRICE.cost(1000, 500))


def test_f8_an_answer_without_usage_is_charged_its_reservation(server, make_client):
    client, rec = make_client(max_dollars=10.0, max_tokens=2000)
    server.push(reply(fenced(), usage=None))
    client.complete(REQ, extract=extract_candidate)
    assert rec.calls[0].cost_basis == "reserved"
    assert rec.calls[0].cost_usd == pytest.approx(worst_case(2000))


def test_f8_retries_stop_at_the_cap(server, make_client):
    max_tokens = 100_000
    cap = 2.5 * worst_case(max_tokens)  # room for two attempts' worst cases, not three
    client, rec = make_client(max_dollars=cap, max_tokens=max_tokens, max_attempts=5)
    server.push(*[error(500)] * 5)
    with pytest.raises(BudgetExceededError):
        client.complete(REQ, extract=extract_candidate)
    assert len(server.requests) == 2
    assert rec.spent_usd() <= cap


def test_f8_the_ledger_survives_a_restart_jsonl(server, make_client, tmp_path):
    log = tmp_path / "llm_calls.jsonl"
    cap = 3 * worst_case(1000)
    client, rec = make_client(JsonlCallRecorder(log), max_dollars=cap, max_tokens=1000)
    server.push(error(500), reply(fenced(), usage=None))
    client.complete(REQ, extract=extract_candidate)
    spent = rec.spent_usd()
    assert spent == pytest.approx(2 * worst_case(1000))

    # "restart": a new process opens the same log and sees what was spent
    again = JsonlCallRecorder(log)
    assert again.spent_usd() == pytest.approx(spent)
    client2, _ = make_client(again, max_dollars=cap, max_tokens=1000)
    server.push(error(500), reply(fenced()))
    with pytest.raises(BudgetExceededError):
        client2.complete(REQ, extract=extract_candidate)  # the 2nd attempt no longer fits
    assert len(server.requests) == 3


def test_jsonl_recorder_ignores_a_torn_last_line(tmp_path):
    log = tmp_path / "calls.jsonl"
    rec = JsonlCallRecorder(log)
    rec.record(spent_call(0.25))
    with open(log, "a", encoding="utf-8") as f:
        f.write('{"call_id": "torn", "cost_us')
    assert JsonlCallRecorder(log).spent_usd() == pytest.approx(0.25)


@pytest.mark.parametrize("kind", ["inmemory", "sqlite"])
def test_f8_the_ledger_survives_a_restart_in_the_store(server, make_client, tmp_path, kind):
    from cutegen.search.storage import InMemoryStorage, RunConfig, SqliteStorage

    def open_store():
        return SqliteStorage(tmp_path / "store.db") if kind == "sqlite" else mem

    mem = InMemoryStorage() if kind == "inmemory" else None
    store = open_store()
    run = store.create_run("r1", RunConfig("softmax_fp32", "t.py", "0" * 64),
                           load_if_exists=True)
    cap = 3 * worst_case(1000)
    client, _ = make_client(StoreCallRecorder(store, run.id), max_dollars=cap, max_tokens=1000)
    server.push(error(503), reply(fenced(), usage=None))
    client.complete(REQ, extract=extract_candidate)
    assert store.llm_spent_usd(run.id) == pytest.approx(2 * worst_case(1000))
    if kind == "sqlite":
        store.close()
        store = open_store()
    recorder = StoreCallRecorder(store, store.get_run("r1").id)
    assert recorder.spent_usd() == pytest.approx(2 * worst_case(1000))
    client2, _ = make_client(recorder, max_dollars=cap, max_tokens=1000)
    server.push(error(500), reply(fenced()))
    with pytest.raises(BudgetExceededError):
        client2.complete(REQ, extract=extract_candidate)
    assert len(server.requests) == 3


def test_store_rows_carry_what_the_store_has_columns_for():
    from cutegen.search.storage import InMemoryStorage, RunConfig

    store = InMemoryStorage()
    run = store.create_run("r", RunConfig("t", "t.py", "0" * 64))
    row = StoreCallRecorder(store, run.id).to_row(
        LLMCall(call_id="c", attempt=2, purpose="repair", model="m", base_url="u",
                system="S", prompt="P", response="R", prompt_tokens=None, cost_usd=None,
                cost_basis="unpriced", outcome="parse_error", error="E", started_at=5.0))
    assert (row.run_id, row.model, row.prompt, row.response, row.attempt, row.outcome,
            row.error) == (run.id, "m", "P", "R", 2, "parse_error", "E")
    assert row.prompt_tokens == 0 and row.cost_usd == 0.0 and row.created_at == 5.0
    # fields the store added columns for are carried by name
    for name, value in (("system", "S"), ("purpose", "repair"), ("call_id", "c")):
        if hasattr(row, name):
            assert getattr(row, name) == value


# -- ledger arithmetic and prices -------------------------------------------------------
def test_ledger_counts_reservations_in_flight():
    ledger = CostLedger(InMemoryCallRecorder(), price=ModelPrice(1e6, 0), max_usd=2.5)
    a = ledger.reserve(1, 0)
    b = ledger.reserve(1, 0)
    with pytest.raises(BudgetExceededError):
        ledger.reserve(1, 0)
    ledger.release(a)
    ledger.release(b)
    assert ledger.reserved_usd() == 0.0
    assert ledger.charge(a, prompt_tokens=None, completion_tokens=None, generated=False) \
        == (0.0, "none")


def test_a_cap_without_a_price_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot be enforced"):
        config_from_env(model="my-local-model", base_url="http://127.0.0.1:8000/v1",
                        env={}, max_dollars=5.0)


def test_unpriced_model_without_cap_records_unknown_cost(server, make_client):
    client, rec = make_client(price=None)
    server.push(reply(fenced()))
    client.complete(REQ, extract=extract_candidate)
    assert rec.calls[0].cost_usd is None and rec.calls[0].cost_basis == "unpriced"


def test_price_lookup_by_prefix():
    assert DEFAULT_PRICES.lookup("gpt-4.1-2025-04-14") == DEFAULT_PRICES.lookup("gpt-4.1")
    assert DEFAULT_PRICES.lookup("gpt-4.1-mini") != DEFAULT_PRICES.lookup("gpt-4.1")
    assert DEFAULT_PRICES.lookup("llama3") is None
    assert DEFAULT_PRICES.as_of and DEFAULT_PRICES.source


def test_price_files_toml_and_json(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('as_of = "2026-11-01"\n[models."qwen2.5-coder:32b"]\n'
                    "input_per_mtok = 0\noutput_per_mtok = 0\n")
    table = load_price_file(toml)
    assert table.lookup("qwen2.5-coder:32b") == ModelPrice(0, 0) and table.as_of == "2026-11-01"
    js = tmp_path / "p.json"
    js.write_text(json.dumps({"models": {"m": {"input_per_mtok": 3, "output_per_mtok": 15}}}))
    assert load_price_file(js).lookup("m") == ModelPrice(3, 15)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"m": {"input_per_mtok": 3}}}))
    with pytest.raises(ConfigError, match="output_per_mtok"):
        load_price_file(bad)


def test_price_option():
    assert parse_price_option("gpt-4.1=2/8") == ("gpt-4.1", ModelPrice(2, 8))
    assert parse_price_option("ns/model:7b=0/0") == ("ns/model:7b", ModelPrice(0, 0))
    for bad in ("gpt-4.1", "m=2", "m=a/b", "=1/2"):
        with pytest.raises(ConfigError):
            parse_price_option(bad)


def test_config_reads_only_the_environment_it_is_given(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.invalid/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-process-env")
    cfg = config_from_env(model="gpt-4.1", env={"OPENAI_API_KEY": "sk-test"})
    assert cfg.base_url == "https://api.openai.com/v1" and cfg.api_key == "sk-test"
    assert cfg.price == DEFAULT_PRICES.lookup("gpt-4.1")
    assert "sk-test" not in repr(cfg)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        config_from_env(model="gpt-4.1", env={})
    local = config_from_env(model="llama", env={"OPENAI_BASE_URL": "http://localhost:11434/v1"})
    assert local.api_key == "unused" and local.base_url == "http://localhost:11434/v1"
