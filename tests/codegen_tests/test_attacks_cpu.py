"""The attack suite on the CPU: every attack is valid Python, and the static filter (a cheap
first line, not the defence) already rejects most of them; the GPU test runs them all with
the filter off."""

from __future__ import annotations

import ast

import pytest
from _cutegen_attacks import ATTACKS  # registered by conftest.py

from cutegen.codegen.eval.static import check_source

#: Attacks whose tricks are dynamic enough to pass the filter: only the runtime stops them.
#: Attempts that, on the H200, forged nothing: correct is accepted at the honest time.
TIME_TRUE = {"rerecorded_events"}
PASS_THE_FILTER = {"honest_first_then_torch", "honest_on_verification_like_inputs_only",
                   "torch_when_unprofiled", "wrong_on_every_other_call"}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_valid_python_and_filtered(name, make_candidate):
    twist, accepted = ATTACKS[name]
    code = make_candidate(name, **twist).code
    ast.parse(code)
    r = check_source(code)
    assert accepted and (name in TIME_TRUE or all(v.value != "correct" for v in accepted))
    if name not in PASS_THE_FILTER:
        assert not r.ok, f"{name} passed the static filter"


def test_the_suite_spans_the_threat_model():
    assert len(ATTACKS) >= 20
