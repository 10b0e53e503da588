"""F8: the dollar cap. A call whose worst case could pass it is refused before it is sent;
the ledger is derived from the recorded calls, so it survives a restart; every attempt,
retries included, is charged. Also prices and configuration errors."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest

from cutegen._loopback_llm import error, fenced, reply
from cutegen.codegen.llm import (
    DEFAULT_PRICES,
    CostLedger,
    LLMCall,
    LLMRequest,
    ModelPrice,
    config_from_env,
    estimate_tokens,
    extract_candidate,
    load_price_file,
    parse_price_option,
)
from cutegen.errors import BudgetExceededError, ConfigError
from cutegen.search.storage import StoreCallRecorder
from cutegen.testing import InMemoryCallRecorder

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


def test_the_store_keeps_the_clients_record_whole(tmp_path):
    """One record for client and store: what the client recorded is what the store gives
    back, including an unpriced call's unknown cost and a missing usage."""
    from cutegen.search.storage import RunConfig, SqliteStorage

    call = LLMCall(call_id="c", attempt=2, purpose="repair", model="m", base_url="u",
                   system="S", prompt="P", response="R", prompt_tokens=None, cost_usd=None,
                   cost_basis="unpriced", outcome="parse_error", error="E", started_at=5.0,
                   streamed=True)
    store = SqliteStorage(tmp_path / "s.db")
    run = store.create_run("r", RunConfig("t", "t.py", "0" * 64))
    StoreCallRecorder(store, run.id).record(call)
    store.close()
    store = SqliteStorage(tmp_path / "s.db")
    assert store.get_llm_calls(run.id) == [call]
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db:
        row = db.execute("SELECT created_at, cost_usd FROM llm_calls").fetchone()
    assert row == (5.0, 0.0)  # the columns rows have always had, filled as before


def test_rows_written_before_the_store_kept_every_field_still_read(tmp_path):
    """A row from before schema step m004 (no base_url, cost_basis, started_at, ...)."""
    from cutegen.search.storage import RunConfig, SqliteStorage

    store = SqliteStorage(tmp_path / "s.db")
    run = store.create_run("r", RunConfig("t", "t.py", "0" * 64))
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db, db:
        db.execute("INSERT INTO llm_calls (run_id, model, prompt, response, prompt_tokens, "
                   "completion_tokens, cost_usd, latency_s, outcome, attempt, error, "
                   "created_at, call_id, purpose) VALUES (?, 'm', 'p', 'r', 7, 0, 0.5, 1.0, "
                   "'ok', 1, '', 9.0, 'c', 'rewrite')", (run.id,))
    store = SqliteStorage(tmp_path / "s.db")
    (c,) = store.get_llm_calls(run.id)
    assert (c.cost_usd, c.cost_basis, c.started_at, c.base_url, c.prompt_tokens) == (
        0.5, "unrecorded", 9.0, "", 7)
    assert store.llm_spent_usd(run.id) == 0.5
    store.close()


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
