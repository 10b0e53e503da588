"""F7: malformed replies give a recorded parse error and nothing to compile; the pure
extraction rules, and the same faults arriving through the real client."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutegen._loopback_llm import SAMPLE_CANDIDATE, completion_json, fenced, raw, reply
from cutegen.codegen.llm import LLMRequest, extract_candidate, fenced_blocks
from cutegen.codegen.prompting import code_block

OTHER = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_one_python_block_is_the_candidate():
    x = extract_candidate(fenced())
    assert x.ok and x.code == SAMPLE_CANDIDATE and x.notes == "Here is the kernel."


def test_other_blocks_without_model_new_are_ignored():
    text = ("Run it with:\n```bash\npython bench.py\n```\nA helper:\n```python\nx = 1\n```\n"
            + fenced())
    assert extract_candidate(text).code == SAMPLE_CANDIDATE


@pytest.mark.parametrize(("text", "needle"), [
    ("I cannot help with that.", "no fenced code block"),
    ("```cuda\n__global__ void k() {}\n```", "tagged cuda, not python"),
    ("```cpp\nclass ModelNew {};\n```\n```cuda\nx\n```", "tagged cpp, cuda"),
    (fenced() + "\nOr this one:\n" + fenced(OTHER), "ambiguous: 2 python blocks"),
    ("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n", "never closed"),
    ("```python\ndef f():\n    pass\n```", "no python block in the reply defines class ModelNew"),
    ("```python\nx = '\udcff'\nclass ModelNew: pass\n```", "not valid UTF-8"),
    ("```python\nclass ModelNew: pass\x00\n```", "NUL"),
    ('{"explanation": "x"}', "no 'code' string"),
    ('{"explanation": "x", "code": "def f(): pass"}', "does not define class ModelNew"),
])
def test_f7_malformed_replies_are_parse_errors(text, needle):
    x = extract_candidate(text)
    assert not x.ok and x.code is None
    assert needle in x.error


def test_f7_a_10_mb_reply_is_rejected_unread():
    big = fenced() + "x" * (10 * 1024 * 1024)
    x = extract_candidate(big, max_chars=400_000)
    assert not x.ok and "over the limit" in x.error


def test_untagged_and_tilde_fences_count_as_python():
    assert extract_candidate(f"```\n{OTHER}```").code == OTHER
    assert extract_candidate(f"~~~py\n{OTHER}~~~").code == OTHER


def test_structured_reply_with_fenced_code_inside():
    text = json.dumps({"explanation": "e", "code": f"```python\n{OTHER}```"})
    assert extract_candidate(text).code == OTHER


def test_a_fence_inside_the_code_does_not_end_the_block():
    code = 'DOC = """\n```\nnot a fence end\n```\n"""\n' + OTHER
    assert extract_candidate(code_block(code)).code == code


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_extraction_never_raises_and_only_returns_model_new(text):
    x = extract_candidate(text)
    assert x.ok == (x.code is not None)
    if x.ok:
        assert "class ModelNew" in x.code
    else:
        assert x.error


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=200))
def test_code_block_round_trips_through_extraction(body):
    code = f"{body}\nclass ModelNew:\n    pass\n"
    if len(fenced_blocks(code)) > 0:
        return  # the body itself holds fences at line starts; covered above
    x = extract_candidate("Answer:\n" + code_block(code))
    assert x.ok, x.error
    assert x.code.rstrip() == code.replace("\r\n", "\n").rstrip()  # CRLF read as LF


# -- the same faults through the real client ------------------------------------------------
def _non_utf8_body() -> bytes:
    content = b"```python\\nclass ModelNew:\\n    s = \\\"\xff\xfe\\\"\\n```"
    return completion_json(content)


@pytest.mark.parametrize(("answer", "outcome", "needle"), [
    (raw(_non_utf8_body()), "parse_error", "not valid UTF-8"),
    (reply(fenced() + "\n" + "y" * (10 * 1024 * 1024)), "parse_error", "over the limit"),
    (reply("no code at all"), "parse_error", "no fenced code block"),
    (raw(b"<html>502 Bad Gateway</html>"), "malformed", "not JSON"),
    (raw(b'{"choices": []}'), "malformed", "no choices"),
    (raw(b'{"error": {"message": "overloaded"}}'), "malformed", "overloaded"),
])
def test_f7_through_the_client_recorded_and_not_retried(server, make_client, answer, outcome,
                                                        needle):
    client, rec = make_client()
    server.push(answer)
    result = client.complete(LLMRequest("s", "u"), extract=extract_candidate)
    assert not result.ok and result.code is None
    assert len(server.requests) == 1
    (call,) = rec.calls
    assert call.outcome == outcome and needle in call.error
    assert call.candidate_sha256 is None
    assert len(call.response) < 500_000  # a 10 MB reply is not stored whole


def test_f7_a_body_over_the_byte_cap_is_cut_off(server, make_client):
    client, rec = make_client(max_response_bytes=100_000)
    server.push(reply("z" * 1_000_000))
    result = client.complete(LLMRequest("s", "u"), extract=extract_candidate)
    assert not result.ok and rec.calls[0].outcome == "too_large"
    assert rec.calls[0].cost_basis == "usage" or rec.calls[0].cost_basis == "reserved"
