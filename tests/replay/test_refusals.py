"""What a provider would refuse: the definitions at their edges, and ``replay --check``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from amplifier_module_context_simple import REPAIR_KINDS, ContextConfig, SimpleContextManager
from amplifier_module_context_simple.replay.command.cli import CHECK_FAILED, app
from amplifier_module_context_simple.replay.engine import engine as engine_module
from amplifier_module_context_simple.replay.engine.report import ReplayReport, RequestRecord
from amplifier_module_context_simple.replay.findings.refusals import (
    STORM_MIN,
    STREAK_MIN,
    assess,
    longest_run,
)
from amplifier_module_context_simple.replay.output.findings_output import render_refusals
from amplifier_module_context_simple.replay.provider.simulation import Window

from ..conftest import CORPUS_DIR

SESSION = CORPUS_DIR.parent / "sessions" / "opus-session-recall"
runner = CliRunner()


def record(
    request: int,
    *,
    view: int = 100,
    budget: int = 1_000,
    overhead: int = 0,
    compacted: bool = False,
    violations: tuple[str, ...] = (),
    repairs: dict[str, int] | None = None,
) -> RequestRecord:
    return RequestRecord(
        request=request, at_message=request, history_messages=request, history_tokens=view,
        view_messages=request, view_tokens=view, budget=budget, budget_event_source="test",
        utilisation=view / budget, level=int(compacted), compacted=compacted, removed=0,
        truncated=0, stubbed=0, left_out=0, shortened=0, stubs=0, repaired=0, notice=False,
        valid=not violations, host_valid=None, violations=list(violations), prefix_stable=True,
        overhead_tokens=overhead, repairs=dict(repairs or {}), request_budget=budget,
    )  # fmt: skip


def report_of(records: list[RequestRecord], window: Window | None = None) -> ReplayReport:
    return ReplayReport(source={}, config=ContextConfig(), window=window, requests=records)


# --- the definitions ------------------------------------------------------------------------


def test_above_the_window_counts_view_overhead_and_requested_output() -> None:
    window = Window(context_window=10_000, max_output_tokens=2_000)
    exact = record(1, view=7_000, overhead=1_000)  # 7,000 + 1,000 + 2,000 = the window
    over = record(2, view=7_000, overhead=1_001)
    by_overhead_only = record(3, view=100, overhead=8_000)
    result = assess(report_of([exact, over, by_overhead_only], window))
    assert [v.request for v in result.refused] == [2, 3]
    assert result.above_window == 2 and result.invalid == 0
    assert (
        "7,000 view + 1,001 overhead + 2,000 output = 10,001 > 10,000"
        in (result.refused[0].reasons[0])
    )
    # No window known: nothing is judged above it.
    assert assess(report_of([over])).refused == []


def test_a_request_within_the_budget_but_above_the_window_is_the_providers_stricter_rule() -> None:
    window = Window(context_window=10_000, max_output_tokens=2_000)
    within = record(1, view=8_500, budget=9_000)  # 8,500 + 2,000 > 10,000, yet under 9,000
    over = record(2, view=9_500, budget=9_000)
    within.reserved_output = over.reserved_output = 500
    result = assess(report_of([within, over], window))
    assert [v.request for v in result.refused] == [1, 2] and result.within_budget == 1
    assert [v.within_budget for v in result.refused] == [True, False]
    assert "within the module's 9,000-token request budget" in result.refused[0].reasons[0]
    assert "held back 500" in result.refused[0].reasons[0]
    assert "budget" not in result.refused[1].reasons[0]
    assert result.as_json()["within_budget"] == 1


def test_any_violation_is_a_refusal() -> None:
    bad = record(1, violations=("duplicate tool-call id 'c1' in view[3] and view[5]",))
    result = assess(report_of([record(2), bad]))
    (verdict,) = result.refused
    assert verdict.request == 1 and verdict.invalid and not verdict.above_window
    assert verdict.reasons == ["invalid: duplicate tool-call id 'c1' in view[3] and view[5]"]


@pytest.mark.parametrize("length", [STREAK_MIN - 1, STREAK_MIN, STREAK_MIN + 2])
def test_over_budget_streak_from_streak_min(length: int) -> None:
    records = [record(1, view=1_001)]  # a lone over-budget view, then a gap
    records += [record(2)]
    records += [record(3 + i, view=1_001) for i in range(length)]
    records += [record(3 + length, view=1_000)]  # at the budget is not over it
    result = assess(report_of(records))
    assert result.longest_over_budget.length == max(length, 1)
    assert result.over_budget_streak == (length >= STREAK_MIN)
    if length > 1:
        assert result.longest_over_budget.first_request == 3
        assert result.longest_over_budget.last_request == 2 + length
    assert result.refused == []  # a provider still takes each of these views


@pytest.mark.parametrize("length", [STORM_MIN - 1, STORM_MIN])
def test_storm_from_storm_min_consecutive_compactions(length: int) -> None:
    records = [record(1 + i, compacted=True) for i in range(length)]
    records += [record(length + 1), record(length + 2, compacted=True)]
    result = assess(report_of(records))
    assert result.longest_compaction_run.length == length
    assert result.storm == (length >= STORM_MIN)


@given(st.lists(st.booleans(), max_size=40))
def test_longest_run_is_the_longest_stretch(flags: list[bool]) -> None:
    records = [record(i + 1, compacted=flag) for i, flag in enumerate(flags)]
    run = longest_run(records, lambda r: r.compacted)
    text = "".join("x" if f else "." for f in flags)
    assert run.length == max((len(part) for part in text.split(".")), default=0)
    if run.length:
        assert run.last_request - run.first_request + 1 == run.length
        assert all(flags[run.first_request - 1 : run.last_request])


def test_repairs_are_counted_by_kind_over_views() -> None:
    records = [record(1, repairs={"id-renamed": 2}), record(2, repairs={"id-renamed": 2})]
    result = assess(report_of(records))
    assert result.repairs["id-renamed"].views == 2


# --- on real replays ------------------------------------------------------------------------


def _write(tmp_path: Path, messages: list[dict[str, Any]]) -> str:
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return str(path)


def _round(call_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "tool": "ls"}]},
        {"role": "tool", "tool_call_id": call_id, "content": text},
    ]


CLEAN = [{"role": "user", "content": "List the files."}, *_round("c1", "a.py"),
         {"role": "assistant", "content": "One file."}]  # fmt: skip


def test_check_exits_with_its_own_status_when_a_view_is_above_the_window(
    tmp_path: Path,
) -> None:
    long_prompt = {"role": "user", "content": "List the files. " + "Details follow. " * 1_500}
    path = _write(tmp_path, [long_prompt, *CLEAN[1:]])
    # view + 12,000 requested output > 16,000.
    window = ["--context-window", "16000", "--max-output-tokens", "12000"]
    result = runner.invoke(app, ["replay", "--full", path, *window, "--check"])
    assert result.exit_code == CHECK_FAILED == 4, result.stderr
    assert "check failed: 2 of 2 view(s) would be refused; first, request 1: above the window" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert (
        runner.invoke(app, ["replay", "--full", path, *window]).exit_code == 0
    )  # only with --check
    report = json.loads(runner.invoke(app, ["replay", path, *window, "--json"]).stdout)
    assert report["refusals"]["refused_views"] == report["summary"]["refused_views"] == 2
    # The long prompt is over the budget too (4,000 once the output and the margin are held
    # back): the summary and --check tell one story.
    assert report["summary"]["over_budget_requests"] == 2
    assert report["summary"]["refused_within_budget"] == 0
    fine = ["--context-window", "16000", "--max-output-tokens", "4000"]
    assert runner.invoke(app, ["replay", "--full", path, *fine, "--check"]).exit_code == 0


def test_a_window_too_small_for_the_output_is_the_providers_stricter_rule(tmp_path: Path) -> None:
    prompt = {"role": "user", "content": "List the files. " + "Details follow. " * 600}
    path = _write(tmp_path, [prompt, *CLEAN[1:]])
    # The budget holds back 11,000 of the 14,000 output (it keeps a quarter of the window for
    # the input): a view within its 4,000 is still above the window with the whole output.
    window = ["--context-window", "16000", "--max-output-tokens", "14000"]
    report = json.loads(runner.invoke(app, ["replay", path, *window, "--json"]).stdout)
    summary = report["summary"]
    assert summary["request_budget"] == 4_000 and summary["over_budget_requests"] == 0
    assert summary["refused_views"] == summary["refused_within_budget"] == 2
    result = runner.invoke(app, ["replay", "--full", path, *window, "--check"])
    assert result.exit_code == CHECK_FAILED
    assert "the budget held back 11,000)" in result.stderr
    text = " ".join(runner.invoke(app, ["replay", "--full", path, *window]).stdout.split())
    assert "held back 11,000 (the budget keeps a quarter of the window for the input)" in text


class _DuplicatedResult(SimpleContextManager):
    """The real manager, with the view's last message sent twice (a duplicated tool result)."""

    async def get_messages_for_request(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        view = await super().get_messages_for_request(*args, **kwargs)
        return [*view, dict(view[-1])] if view[-1].get("role") == "tool" else view


def test_check_fails_on_an_invalid_view(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = _write(tmp_path, CLEAN)
    monkeypatch.setattr(engine_module, "SimpleContextManager", _DuplicatedResult)
    result = runner.invoke(app, ["replay", "--full", path, "--check"])
    assert result.exit_code == CHECK_FAILED, (result.stdout, result.stderr)
    assert "first, request 2: invalid:" in result.stderr


def test_a_reused_tool_id_passes_the_check_with_the_rename_among_the_repairs(
    tmp_path: Path,
) -> None:
    messages = [{"role": "user", "content": "Twice."}, *_round("c1", "one"), *_round("c1", "two"),
                {"role": "assistant", "content": "Done."}]  # fmt: skip
    path = _write(tmp_path, messages)
    result = runner.invoke(app, ["replay", "--full", path, "--check"])
    assert result.exit_code == 0, result.stderr
    assert "id-renamed in 1 view(s)" in " ".join(result.stdout.split())
    report = json.loads(runner.invoke(app, ["replay", path, "--json"]).stdout)
    repairs = report["refusals"]["repairs"]
    assert repairs["id-renamed"] == {"views": 1, "distinct": 2}
    assert set(repairs) <= REPAIR_KINDS
    assert report["requests"][-1]["repairs"]["id-renamed"] == 2


def test_the_headline_fits_80_columns() -> None:
    window = Window(context_window=10_000, max_output_tokens=2_000)
    records = [record(i, view=9_000 + i, budget=8_000, compacted=True) for i in range(1, 15)]
    console = Console(width=80, record=True, highlight=False)
    render_refusals(console, assess(report_of(records, window)))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    flat = " ".join(text.split())
    assert "14 of 14 views" in flat and "10,000-token window" in flat
    assert "14 consecutive requests (1-14)" in flat
    assert "9,001 view + 0 overhead + 2,000 output = 11,001 > 10,000" in flat
    assert "… 4 more" in flat


@pytest.mark.skipif(not SESSION.is_dir(), reason="the shared session is not here")
def test_check_on_the_recorded_session() -> None:
    # The recorded system prompt alone (~37,000 tokens) is more than a 30,000-token window.
    too_small = ["--context-window", "30000", "--max-output-tokens", "4000"]
    result = runner.invoke(app, ["replay", "--full", str(SESSION), *too_small, "--check"])
    assert result.exit_code == CHECK_FAILED, result.stderr
    assert "9 of 9 view(s) would be refused; first, request 1: above the window" in result.stderr
    # On the window it ran on (1,000,000, from the model table) nothing is refused.
    clean = runner.invoke(app, ["replay", "--full", str(SESSION), "--check"])
    assert clean.exit_code == 0, clean.stderr
    assert "none of 9 views" in " ".join(clean.stdout.split())


# --- the summary and --check tell one story ---------------------------------------------------

EXAMPLE_200K = ["--context-window", "200000", "--max-output-tokens", "64000"]


def _one_story(report: dict[str, Any]) -> None:
    """The summary's over-budget requests and --check's above-window ones disagree only where
    the report names the provider's stricter rule (``within_budget``)."""
    summary, refusals = report["summary"], report["refusals"]
    above = {v["request"] for v in refusals["refused"] if v["above_window"]}
    over = {r["request"] for r in report["requests"] if r["over_budget"]}
    within = {v["request"] for v in refusals["refused"] if v["within_budget"]}
    assert above - over == within
    assert summary["over_budget_requests"] == len(over)
    assert summary["refused_within_budget"] == refusals["within_budget"] == len(within)
    for r in report["requests"]:
        assert r["request_tokens"] == r["view_tokens"] + r["overhead_tokens"]
        assert r["over_budget"] == (r["request_tokens"] > r["request_budget"])


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", *args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _flat(*args: str) -> str:
    result = runner.invoke(app, ["replay", "--full", *args])
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stdout.split())


def test_the_summary_and_check_agree_on_the_example_at_200000_64000() -> None:
    report = _json(*EXAMPLE_200K)
    _one_story(report)
    summary = report["summary"]
    assert summary["over_budget_requests"] == 0 == summary["refused_views"]
    assert summary["request_budget"] == 200_000 - 64_000 - 4_096
    assert 0.5 < summary["max_utilisation"] <= 1
    assert runner.invoke(app, ["replay", "--full", *EXAMPLE_200K, "--check"]).exit_code == 0
    assert "│ 0 (above the window: 0) │" in _flat(*EXAMPLE_200K)  # Requests over the budget


def test_where_the_provider_reserves_more_output_than_the_budget_the_report_says_so() -> None:
    # Half the output held back (the spec's old formula): the provider still reserves it all.
    args = [*EXAMPLE_200K, "--output-reserve", "0.5"]
    report = _json(*args)
    _one_story(report)
    summary = report["summary"]
    refused = summary["refused_views"]
    assert summary["over_budget_requests"] == 0 < refused == summary["refused_within_budget"]
    checked = runner.invoke(app, ["replay", "--full", *args, "--check"])
    assert checked.exit_code == CHECK_FAILED
    assert "the budget held back 32,000)" in checked.stderr
    assert (
        f"{refused} request(s) within the budget are above the window: the provider reserves "
        "the 64,000 output tokens it is asked for, the budget held back 32,000 "
        "(output_reserve_fraction 0.5)"
    ) in _flat(*args)


@pytest.mark.skipif(not SESSION.is_dir(), reason="the shared session is not here")
def test_the_summary_and_check_agree_on_the_recorded_session() -> None:
    report = _json(str(SESSION))
    _one_story(report)
    summary = report["summary"]
    assert summary["over_budget_requests"] == 0 == summary["refused_views"]
    # The whole request: system prompt, tools, messages and injections, near the 79,312 the
    # provider billed for request 9 (the view alone is ~42,000).
    assert abs(summary["peak_request_tokens"] - 79_312) <= 0.02 * 79_312
    assert summary["peak_view_tokens"] < 43_000
    assert summary["request_budget"] == 300_000
    assert summary["max_utilisation"] == round(summary["peak_request_tokens"] / 300_000, 4)
    assert runner.invoke(app, ["replay", "--full", str(SESSION), "--check"]).exit_code == 0


@pytest.mark.skipif(not SESSION.is_dir(), reason="the shared session is not here")
def test_a_50000_cap_puts_the_recorded_requests_over_the_budget() -> None:
    args = [str(SESSION), "--max-tokens", "50000"]
    report = _json(*args)
    _one_story(report)
    summary = report["summary"]
    assert summary["request_budget"] == 50_000
    # The system prompt, tools and injections alone are ~73,600: no view makes that fit.
    assert summary["over_budget_requests"] == summary["requests"] == 9
    assert all(r["request_tokens"] > 70_000 for r in report["requests"])
    assert summary["max_utilisation"] > 1.4
    # The provider's 1,000,000-token window takes them: here the cap is the stricter rule.
    assert summary["refused_views"] == 0
    assert runner.invoke(app, ["replay", "--full", *args, "--check"]).exit_code == 0
    assert "│ 9 (above the window: 0) │" in _flat(*args)  # Requests over the budget
