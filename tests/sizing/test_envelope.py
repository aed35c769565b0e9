"""A counted envelope as the orchestrator hands it back (sizing/_envelope.py): each malformed
shape refused naming what is wrong, and the hard-safety figures read as counts."""

from __future__ import annotations

import re
from typing import Any

import pytest

from amplifier_module_context_simple.sizing._envelope import Counted, read_counted


def _decision(**fields: Any) -> dict[str, Any]:
    decision: dict[str, Any] = {
        "estimated_input_tokens": 900,
        "input_limit_tokens": 1_000,
        "measurement": None,
    }
    return {"dispatch": {}, "budget_decision": {**decision, **fields}}


@pytest.mark.parametrize(
    ("envelope", "error"),
    [
        ({"dispatch": {}}, "count_view result lacks 'budget_decision' (use None when not counted)"),
        (
            {"dispatch": {}, "budget_decision": 5},
            "count_view: 'budget_decision' must be a mapping or None",
        ),
        (
            _decision(estimated_input_tokens=-1),
            "count_view: 'budget_decision' field 'estimated_input_tokens' must be a non-negative "
            "int, got -1",
        ),
        (
            _decision(input_limit_tokens="1000"),
            "count_view: 'budget_decision' field 'input_limit_tokens' must be a non-negative "
            "int, got '1000'",
        ),
    ],
    ids=["no decision", "decision not a mapping", "negative estimate", "limit as text"],
)
def test_a_malformed_envelope_is_refused_naming_what_is_wrong(envelope: Any, error: str) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(error)}$"):
        read_counted(envelope)


def test_zero_is_a_count_and_an_uncounted_request_says_why() -> None:
    assert read_counted(_decision(estimated_input_tokens=0, input_limit_tokens=0)) == Counted(
        0, 0, None, "'measurement' is None (the provider did not count the request)"
    )
    assert read_counted({"dispatch": {}, "budget_decision": None}) is None
