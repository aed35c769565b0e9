"""The warning that compaction has nothing left to reduce (checks/_diagnostics.py), read
through the log: its words and figures, and when it is repeated."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from amplifier_module_context_simple.checks._diagnostics import MAX_LISTED_REPAIRS, Diagnostics
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


def test_projections_are_mentioned_once_per_kind_at_info_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    diagnostics = Diagnostics()
    growing: list[str] = []
    with caplog.at_level(logging.INFO):
        for more in (
            ["json-encoded: #1", "orphan-dropped: #2", "image-dropped: #3"],
            ["json-encoded: #4"],
            ["blocks-merged: #5"],
            ["image-dropped: #6"],  # a kind seen two requests ago
        ):
            growing += more
            diagnostics.report_repairs(growing)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [
        "context-simple: the view projects messages onto the host's model (image-dropped, "
        "json-encoded); the history keeps them as admitted",
        "context-simple: the view projects messages onto the host's model (blocks-merged); "
        "the history keeps them as admitted",
    ]
    assert diagnostics.repairs == tuple(growing)


def test_a_long_pairing_list_is_cut_short_with_a_count_of_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As the view words them: the detail has colons of its own.
    repairs = [
        f"orphan-dropped: dropped result at position {n}: its call is unknown"
        for n in range(MAX_LISTED_REPAIRS + 3)
    ]
    with caplog.at_level(logging.WARNING):
        Diagnostics().report_repairs(repairs)
        Diagnostics().report_repairs(repairs[: MAX_LISTED_REPAIRS + 1])
        Diagnostics().report_repairs(repairs[:MAX_LISTED_REPAIRS])
    long, one_more, exact = _warnings(caplog)
    listed = "; ".join(repairs[:MAX_LISTED_REPAIRS])
    said = f"context-simple: the history holds unpaired tool messages; the view {listed}"
    assert (long, one_more, exact) == (f"{said} (+3 more)", f"{said} (+1 more)", said)


_DECISIONS = object()


@pytest.mark.parametrize(
    ("system_tokens", "overhead", "why"),
    [
        (100, 5_001, "about 5001 tokens of each request are outside this context (tool "
         "definitions, system overlays); send fewer tools or overlays, or raise the budget"),
        (10_001, 5_000, "the system messages alone take ~10001 tokens, more than the "
         "compaction target; shorten the system prompt or raise the budget"),
        (10_000, 5_000, "protected content (first/last prompt, recent messages, the latest tool "
         "results) is too large; lower protected_recent or protected_tool_results"),
    ],
    ids=["overhead past half the target", "systems past the target", "protected content"],
)  # fmt: skip
def test_above_the_target_the_warning_says_why_once_per_decisions(
    system_tokens: int, overhead: int, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    diagnostics = Diagnostics()
    figures = {"system_tokens": system_tokens, "target": 10_000, "overhead": overhead}
    with caplog.at_level(logging.WARNING):
        diagnostics.warn_if_above_target(_DECISIONS, view_tokens=10_000, **figures)  # at it
        diagnostics.warn_if_above_target(_DECISIONS, view_tokens=12_345, **figures)
        diagnostics.warn_if_above_target(_DECISIONS, view_tokens=13_000, **figures)  # again
        diagnostics.warn_if_above_target(object(), view_tokens=12_000, **figures)  # new ones
    first, second = _warnings(caplog)
    assert first == (
        "context-simple: the view (~12345 tokens) stays above the compaction target (10000) "
        f"after compaction: {why}"
    )
    assert second.startswith("context-simple: the view (~12000 tokens)")


def test_over_the_budget_is_said_once_per_decisions_with_its_figures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    diagnostics = Diagnostics()
    with caplog.at_level(logging.WARNING):
        diagnostics.warn_if_over_budget(_DECISIONS, view_tokens=20_000, budget=20_000)  # fits
        diagnostics.warn_if_over_budget(_DECISIONS, view_tokens=21_000, budget=20_000)
        diagnostics.warn_if_over_budget(_DECISIONS, view_tokens=22_000, budget=20_000)
        diagnostics.warn_if_over_budget(
            object(), view_tokens=23_000, budget=20_000, parts=_budget(0)
        )
    first, second = _warnings(caplog)
    assert first == (
        "context-simple: the view (~21000 tokens) is over the budget (20000) even with every "
        "protection relaxed: the system messages, the first and latest user prompt, the "
        "retained reminders and the active tool round alone are that large; shorten them or "
        "raise the budget (get_messages_for_request_retaining(hard_fit=True) refuses such "
        "a request instead)"
    )
    assert second.startswith("context-simple: the view (~23000 tokens) is over the budget")


def test_a_request_with_no_room_for_any_view_says_so_once_per_figures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    diagnostics = Diagnostics()
    starved = replace(_budget(0), starved=True)
    with caplog.at_level(logging.WARNING):
        for decisions in (_DECISIONS, object()):  # the figures, not the decisions, repeat it
            diagnostics.warn_if_over_budget(decisions, view_tokens=5, budget=20_000, parts=starved)
        diagnostics.warn_if_over_budget(
            _DECISIONS, view_tokens=5, budget=20_000, parts=replace(starved, max_tokens=30_000)
        )
    first, second = _warnings(caplog)
    assert first == (
        "context-simple: no view can fit this request: the budget is 20,000 tokens "
        "(max_tokens_fallback); the provider will refuse it - send fewer or smaller tools, "
        "ask for less output, or use a larger window"
    )
    assert second == first, "new figures, the same words: said again"
