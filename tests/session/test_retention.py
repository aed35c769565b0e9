"""``hard_fit``'s last check (``check_fits``): a view fits up to its budget exactly, and a
request whose fixed parts leave no room says what to change."""

from __future__ import annotations

import pytest
from amplifier_core.llm_errors import ContextLengthError

from amplifier_module_context_simple.planning._plan import RequestPlan
from amplifier_module_context_simple.readings._meter_stats import MeterStats
from amplifier_module_context_simple.session._retention import check_fits
from amplifier_module_context_simple.sizing._budget_record import Budget
from amplifier_module_context_simple.views._decisions import NO_DECISIONS

BUDGET = 5_000


def _plan(view_tokens: int, *, starved: bool = False) -> RequestPlan:
    budget = Budget(
        source="explicit",
        context_window=None,
        max_output_tokens=None,
        reserved_output=None,
        derived_budget=BUDGET,
        max_tokens=None,
        max_tokens_fallback=100_000,
        capped=False,
        effective_budget=BUDGET,
        starved=starved,
    )
    stats = MeterStats(
        "estimate", "estimate", view_tokens, view_tokens, None, BUDGET, 0.0, False, None
    )
    return RequestPlan(
        budget=budget,
        view=[],
        view_tokens=view_tokens,
        decisions=NO_DECISIONS,
        escalated=None,
        stats=None,
        meter_stats=stats,
        usable_budget=BUDGET,
        real_budget=BUDGET,
    )


def test_a_view_exactly_at_its_budget_fits() -> None:
    check_fits(_plan(BUDGET))
    with pytest.raises(ContextLengthError, match=f"needs ~{BUDGET + 1} tokens"):
        check_fits(_plan(BUDGET + 1))


def test_a_starved_request_names_what_would_make_room() -> None:
    with pytest.raises(ContextLengthError) as caught:
        check_fits(_plan(BUDGET + 1, starved=True))
    assert str(caught.value).endswith(
        "send fewer or smaller tools, ask for less output, or use a larger window"
    )
