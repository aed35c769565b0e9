"""The warning that compaction has nothing left to reduce (checks/_diagnostics.py), read
through the log: its words and figures, and when it is repeated."""

from __future__ import annotations

import logging

import pytest

from amplifier_module_context_simple.checks._diagnostics import Diagnostics
from amplifier_module_context_simple.sizing._budget_record import Budget


def _budget(learned: int) -> Budget:
    return Budget(
        source="max_tokens_fallback",
        context_window=None,
        max_output_tokens=None,
        reserved_output=None,
        derived_budget=20_000,
        max_tokens=20_000,
        max_tokens_fallback=20_000,
        capped=False,
        effective_budget=20_000,
        learned_overhead_tokens=learned,
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_warning_names_the_figures_and_what_to_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    Diagnostics().warn_outside_context(measured=31_000, overhead=9_000, budget=30_000)
    assert _warnings(caplog) == [
        "context-simple: the last request measured ~31000 tokens of a 30000-token budget and "
        "compaction has nothing left to reduce; about 9000 tokens of each request are outside "
        "this context (tool definitions, system overlays): send fewer or smaller tools and "
        "overlays, raise the budget, or lower protected_recent / protected_tool_results"
    ]


def test_it_is_repeated_only_when_the_overhead_moves_by_more_than_a_tenth(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    diagnostics = Diagnostics()
    for overhead in (1_000, 1_100, 900, 1_000):  # a tenth of 1,000 either way: no new line
        diagnostics.warn_outside_context(measured=31_000, overhead=overhead, budget=30_000)
    assert len(_warnings(caplog)) == 1
    diagnostics.warn_outside_context(measured=31_000, overhead=1_101, budget=30_000)
    assert len(_warnings(caplog)) == 2
    assert "about 1101 tokens" in _warnings(caplog)[-1]


def test_the_learned_overhead_warning_names_it_and_repeats_past_a_tenth(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="amplifier_module_context_simple")
    diagnostics = Diagnostics()
    for learned in (1_000, 1_100, 900):  # within a tenth of 1,000: said once
        diagnostics.warn_learned_overhead(_budget(learned))
    assert _warnings(caplog) == [
        "context-simple: the provider counts about 1000 tokens per request that neither the "
        "view nor the tool definitions account for (hook injections, provider framing); they "
        "leave the view less than its compaction target: the budget is 20,000 tokens "
        "(max_tokens_fallback)"
    ]
    diagnostics.warn_learned_overhead(_budget(1_101))
    assert len(_warnings(caplog)) == 2


def test_a_repair_list_that_grows_but_changes_before_its_end_is_read_whole(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A longer list is read only past its old end when it starts with the old one: one that
    replaced an earlier entry (a history set anew) names the new repair, not the old one."""
    diagnostics = Diagnostics()
    with caplog.at_level(logging.WARNING):
        diagnostics.report_repairs(["orphan-dropped: message #1"])
        caplog.clear()
        diagnostics.report_repairs(["stray-dropped: message #4", "placeholder-added: #6"])
    (warning,) = _warnings(caplog)
    assert "stray-dropped: message #4" in warning
    assert "placeholder-added: #6" in warning
    assert "message #1" not in warning


def test_a_repair_list_that_only_grows_warns_with_every_pairing_repair_so_far(
    caplog: pytest.LogCaptureFixture,
) -> None:
    diagnostics = Diagnostics()
    with caplog.at_level(logging.WARNING):
        diagnostics.report_repairs(["orphan-dropped: message #1"])
        diagnostics.report_repairs(["orphan-dropped: message #1"])
        assert len(_warnings(caplog)) == 1  # the same list again says nothing
        caplog.clear()
        diagnostics.report_repairs(
            ["orphan-dropped: message #1", "projected: #2", "stray-dropped: #3"]
        )
    (warning,) = _warnings(caplog)
    assert "orphan-dropped: message #1; stray-dropped: #3" in warning
