"""A counted envelope as the orchestrator hands it back (sizing/_envelope.py): each malformed
shape refused naming what is wrong, and the hard-safety figures read as counts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError

from amplifier_module_context_simple.sizing._envelope import (
    Counted,
    fail_closed,
    read_counted,
    read_fitted,
)


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


def test_a_request_over_the_hard_limit_is_refused_saying_what_to_shorten() -> None:
    with pytest.raises(ContextLengthError) as refused:
        fail_closed(Counted(1_200, 1_000, None))
    assert str(refused.value) == (
        "context-simple: the request is ~1200 input tokens and the provider's limit is 1000; "
        "refusing to dispatch it - shorten the system prompt, the first or latest prompt, or "
        "the retained reminders"
    )
    fail_closed(Counted(1_000, 1_000, None))  # at the limit: it goes out


def _fitted(estimated: int, calls: object, measured: bool = True) -> dict[str, Any]:
    measurement = {"kind": "provider_count", "source": "anthropic", "input_tokens": estimated}
    envelope = _decision(
        estimated_input_tokens=estimated, measurement=measurement if measured else None
    )
    return {**envelope, "count_calls": calls}


@pytest.mark.parametrize(
    ("relief", "error"),
    [
        (_fitted(900, 0), "fit_output result needs a positive int 'count_calls'"),
        (
            _fitted(900, 1, measured=False),
            "fit_output result carries no usable provider measurement",
        ),
    ],
    ids=["no count calls", "no measurement"],
)
def test_a_malformed_fitted_envelope_is_refused_naming_what_is_wrong(
    relief: dict[str, Any], error: str
) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(error)}$"):
        read_fitted(relief)


def test_a_fitted_request_still_over_the_limit_is_refused_with_its_figures() -> None:
    with pytest.raises(ContextLengthError) as refused:
        read_fitted(_fitted(1_200, 1))
    assert str(refused.value) == (
        "context-simple: even with a smaller output allowance the request exceeds the "
        "provider's input limit (1200 > 1000)"
    )
    assert read_fitted(_fitted(1_000, 1)).figures()[0] == 1_000
