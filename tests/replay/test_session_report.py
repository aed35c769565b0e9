"""A recorded session replayed end to end: the window by category, the cache as the provider saw
it, and what the recorded requests add to the replayed views (their overhead).

The sessions are built here with the real layout and payloads shaped as the Anthropic provider
sends them (tool results inside user messages, a status reminder appended to the newest tool
result), so a clone without ``../shared`` tests the whole path; the real recorded session is
checked at the end when it is there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import ContextConfig, estimate_message_tokens
from amplifier_module_context_simple.replay.engine.engine import replay
from amplifier_module_context_simple.replay.engine.session_analysis import (
    BASIS_GIVEN,
    BASIS_PAYLOAD,
)
from amplifier_module_context_simple.replay.output.plot import window_series
from amplifier_module_context_simple.replay.recordings.session_dir import read_session
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions

from .cli_runs import run, run_json

REAL_SESSION = Path(__file__).resolve().parents[3] / "shared" / "sessions" / "opus-session-recall"
REMINDER = (
    '\n<system-reminder source="hooks-status-context">\n'
    + "Working directory: /workspace; the environment is as follows. " * 40
    + "\n</system-reminder>"
)
TOOLS = [{"name": "bash", "description": "Run a shell command. " * 30, "input_schema": {}}]


def conversation(rounds: int) -> list[dict[str, Any]]:
    """One prompt, ``rounds`` tool rounds, one reply: ``rounds + 1`` requests."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Survey the build. " * 20}]
    for n in range(rounds):
        messages += [
            {
                "role": "assistant",
                "content": f"Step {n}.",
                "tool_calls": [{"id": f"call_{n}", "tool": "bash", "arguments": {"n": n}}],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "name": "bash",
             "content": f"output {n}\n" * 40},
        ]  # fmt: skip
    messages.append({"role": "assistant", "content": "Done: " + "all fine. " * 20})
    return messages


def provider_messages(transcript: list[dict[str, Any]], *, inject: bool) -> list[dict[str, Any]]:
    """``transcript`` as the Anthropic provider sends it, the reminder on the newest message."""
    out: list[dict[str, Any]] = []
    for m in transcript:
        if m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}]
            for call in m.get("tool_calls", []):
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["tool"],
                               "input": call["arguments"]})  # fmt: skip
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": m["content"]})
    if inject:
        last = out[-1]["content"]
        if isinstance(last, list) and last[-1]["type"] == "tool_result":
            last[-1] = {**last[-1], "content": last[-1]["content"] + REMINDER}
        else:
            out.append({"role": "user", "content": [{"type": "text", "text": REMINDER}]})
    return out


def usage_for(number: int) -> dict[str, int]:
    return {
        "input_tokens": 9_000 + 100 * number,
        "cache_read_tokens": 0 if number == 1 else 8_000,
        "cache_write_tokens": 500 + number,
        "output_tokens": 40,
    }


def make_session(
    directory: Path,
    *,
    rounds: int = 4,
    inject: bool = True,
    tools: Callable[[int], list[dict[str, Any]] | None] = lambda _: TOOLS,
    system: list[dict[str, Any]] | None = None,
    usage: Callable[[int, dict[str, Any]], dict[str, int]] | None = None,
) -> Path:
    """A session directory whose events hold one payload and one usage per request.

    ``tools``: request number -> the payload's ``tools`` (``None``: the payload has none);
    ``system``: the payloads' system blocks (one short block by default); ``usage``: (request
    number, payload) -> the usage recorded for it (``usage_for`` by default).
    """
    transcript = conversation(rounds)
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(m) + "\n" for m in transcript)
    (directory / "transcript.jsonl").write_text(lines, encoding="utf-8")
    context = {"module": "context-simple", "config": {"max_tokens": 60_000}}
    provider = {"module": "provider-anthropic", "config": {"default_model": "claude-opus-4-8"}}
    config = {"session": {"context": context}, "providers": [provider]}
    events: list[dict[str, Any]] = [{"event": "session:config", "data": {"raw": config}}]
    number = 0
    for position, message in enumerate(transcript):
        if message["role"] != "assistant":
            continue
        number += 1
        payload: dict[str, Any] = {
            "model": "claude-opus-4-8",
            "system": system or [{"type": "text", "text": "You are careful. " * 50}],
            "messages": provider_messages(transcript[:position], inject=inject),
            "max_tokens": 8_000,
        }
        if (recorded := tools(number)) is not None:
            payload["tools"] = recorded
        events.append(
            {"event": "llm:request", "data": {"model": "claude-opus-4-8", "raw": payload}}
        )
        reading = usage(number, payload) if usage else usage_for(number)
        events.append({"event": "llm:response", "data": {"usage": reading}})
    folder = directory / "context-intelligence"
    folder.mkdir()
    (folder / "events.jsonl").write_text(
        "".join(json.dumps({"ts": "t", "lvl": "INFO", "session_id": "s", **e}) + "\n"
                for e in events),
        encoding="utf-8",
    )  # fmt: skip
    return directory


def test_the_window_is_broken_down_over_the_recorded_payloads(tmp_path: Path) -> None:
    report = run_json("replay", str(make_session(tmp_path / "s")))
    assert report["window_basis"] == BASIS_PAYLOAD
    windows, requests = report["window_by_category"], report["requests"]
    assert len(windows) == len(requests) == 5
    reminder = estimate_message_tokens({"role": "user", "content": REMINDER}, family="claude47")
    for w, r in zip(windows, requests, strict=True):
        held = w["categories"]
        assert held["system prompt"] > 0 and held["tool definitions"] > 0
        # The reminder is found as an injection of about its own size, wherever it sits.
        assert abs(held["ephemeral injections"] - reminder) <= 0.05 * reminder
        assert [i["first_line"] for i in w["injections"]] == [REMINDER.strip().splitlines()[0]]
        # What the replayed view lacks: the tools and the injection (it has the system prompt).
        assert r["overhead_tokens"] == held["tool definitions"] + held["ephemeral injections"]
        assert (
            w["provider"]
            == usage_for(r["request"])["input_tokens"]
            + usage_for(r["request"])["cache_write_tokens"]
        )
        assert w["gap"] == w["used"] - w["provider"]


def test_the_recorded_tool_definitions_reach_the_replayed_budget(tmp_path: Path) -> None:
    # The live module holds back the tools the coordinator mounted; the replay's manager is
    # told the ones each payload recorded, priced by the same rule as the window table.
    priced = estimate_tool_definitions(TOOLS, "claude47")
    report = run_json("replay", str(make_session(tmp_path / "s")))
    assert report["budget"]["tool_definitions_tokens"] == priced > 0
    assert all(w["categories"]["tool definitions"] == priced for w in report["window_by_category"])
    # A payload without tools leaves the last ones in force; a new list replaces them.
    more = [*TOOLS, {"name": "grep", "description": "Search files. " * 40, "input_schema": {}}]
    only_first = make_session(tmp_path / "a", tools=lambda n: TOOLS if n == 1 else None)
    changed = make_session(tmp_path / "b", tools=lambda n: TOOLS if n < 3 else more)
    none = make_session(tmp_path / "c", tools=lambda _: None)
    assert run_json("replay", str(only_first))["budget"]["tool_definitions_tokens"] == priced
    assert run_json("replay", str(changed))["budget"]["tool_definitions_tokens"] == (
        estimate_tool_definitions(more, "claude47")
    )
    assert run_json("replay", str(none))["budget"]["tool_definitions_tokens"] == 0


def test_the_budget_line_gives_the_parts_with_the_replay_figures(tmp_path: Path) -> None:
    session = str(make_session(tmp_path / "s"))
    report = run_json("replay", session)
    last, first = report["budget"], report["initial_budget"]
    tools, learned = last["tool_definitions_tokens"], last["learned_overhead_tokens"]
    assert tools > 0 and learned > 0 == first["learned_overhead_tokens"]
    # max_tokens caps the request; the tools and what the readings taught come off the cap.
    assert last["effective_budget"] == 60_000 - tools - learned
    assert first["effective_budget"] == 60_000 - tools
    assert report["summary"]["request_budget"] == 60_000
    out = " ".join(run("replay", "--full", session).stdout.split())
    assert (
        f"Budget {last['effective_budget']:,} tokens for the messages at the last request = "
        "min(simulated 200,000-token window - 8,000 output held back - 4,096 margin, "
        f"max_tokens 60,000 (session events)) - {tools:,} tool definitions - {learned:,} "
        "learned overhead"
    ) in out
    assert (
        f"the first request's: {first['effective_budget']:,} (the same limit - {tools:,} tool "
        "definitions - 0 learned overhead: no reading yet)"
    ) in out
    # The settings table lists the request budget, which both requests ran on.
    assert "60,000 (whole request, max_tokens cap)" in out


def test_a_reminder_that_moves_breaks_the_cache_at_every_request(tmp_path: Path) -> None:
    report = run_json("replay", str(make_session(tmp_path / "s")))
    cache, summary = report["cache"], report["summary"]
    assert cache["breaks"] == summary["cache_breaks"] == 4
    assert summary["cache_break_causes"] == {"tail injection moved": 4}
    assert [r["break"] for r in cache["requests"]] == [False, True, True, True, True]
    read = sum(usage_for(n)["cache_read_tokens"] for n in range(1, 6))
    occupancy = sum(usage_for(n)["input_tokens"] + usage_for(n)["cache_write_tokens"]
                    for n in range(1, 6))  # fmt: skip
    assert summary["cache_read_share"] == round(read / occupancy, 4)
    assert summary["prefix_stable_requests"] == 5, "the replayed views themselves are stable"
    # Nothing was compacted: the views sent the whole history (plus the recorded system
    # prompt, which is no saving and no loss).
    assert summary["compactions"] == 0 and summary["tokens_saved"] == 0
    assert all(r["system_prompt_tokens"] > 0 for r in report["requests"])


def test_without_injections_the_recorded_requests_extend_each_other(tmp_path: Path) -> None:
    report = run_json("replay", str(make_session(tmp_path / "s", inject=False)))
    assert report["summary"]["cache_breaks"] == 0
    for w, r in zip(report["window_by_category"], report["requests"], strict=True):
        assert w["categories"]["ephemeral injections"] == 0
        assert r["overhead_tokens"] == w["categories"]["tool definitions"]


def test_the_text_report_puts_the_recorded_cache_beside_the_replayed_views(
    tmp_path: Path,
) -> None:
    result = run("replay", "--full", str(make_session(tmp_path / "s")))
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "Recorded cache breaks" in out and "4 (4 tail injection moved)" in out
    assert "What the window held, per request" in out and "ephemeral injections" in out
    assert "max_tokens 60,000 (session events))" in out  # the cap in the budget line


def test_the_overhead_counts_when_judging_a_view_against_the_window(tmp_path: Path) -> None:
    session = str(make_session(tmp_path / "s"))
    report = run_json("replay", session)
    view = max(r["view_tokens"] for r in report["requests"])
    overhead = min(r["overhead_tokens"] for r in report["requests"])
    # The view plus its output fit the window; with the overhead they do not.
    window = view + 4_000 + 4_096 + 1
    assert view + 8_000 <= window < view + overhead + 8_000
    args = ["--context-window", str(window), "--max-output-tokens", "8000",
            "--compact-threshold", "1.0", "--no-notice", "--max-tokens", "999999"]  # fmt: skip
    checked = run("replay", "--full", session, *args, "--check")
    assert checked.exit_code == 4, checked.stdout
    assert "overhead" in checked.stderr
    # Once readings show the overhead, the budget holds it back: nothing is left for the
    # view, and the replay says so by leaving out all it can. The first reading is far above
    # what its request carried and above this window's room: it is believed only once the
    # next one confirms it (issue 28).
    replayed = run_json("replay", session, *args)
    assert replayed["summary"]["compactions"] >= 1
    assert replayed["requests"][1]["budget"] > 1
    assert all(r["budget"] == 1 for r in replayed["requests"][2:])
    # A starved budget is one token for the messages, but the request budget stays what the
    # window leaves the input (not 1 + the held-back parts). This window is small enough that
    # the budget keeps a quarter of it for the input, holding back less than the 8,000 output
    # the provider reserves: the refused requests are within the budget, and marked so.
    room = window - replayed["budget"]["reserved_output"] - window // 16
    assert all(r["request_budget"] == room for r in replayed["requests"])
    refused = replayed["refusals"]["refused"]
    assert refused and all(v["above_window"] and v["within_budget"] for v in refused)
    assert replayed["summary"]["refused_within_budget"] == len(refused)


def test_a_bare_transcript_counts_the_overhead_given(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in conversation(3)), encoding="utf-8")
    plain = run_json("replay", str(path))
    given = run_json("replay", str(path), "--overhead", "5000")
    assert given["window_basis"] == BASIS_GIVEN and plain["window_basis"] != BASIS_GIVEN
    assert all(r["overhead_tokens"] == 5_000 for r in given["requests"])
    assert all(w["categories"]["overhead (given)"] == 5_000 for w in given["window_by_category"])
    assert all(r["overhead_tokens"] == 0 for r in plain["requests"])
    view = max(r["view_tokens"] for r in plain["requests"])
    window = [
        "--context-window", str(view + 500 + 4_096 + 1), "--max-output-tokens", "1000",
        "--compact-threshold", "1.0", "--no-notice",
    ]  # fmt: skip
    assert run("replay", "--full", str(path), *window, "--check").exit_code == 0
    refused = run("replay", "--full", str(path), *window, "--overhead", "5000", "--check")
    assert refused.exit_code == 4
    # The summary counts the same whole request over the budget that --check refuses.
    plain_fit = run_json("replay", str(path), *window)["summary"]
    over = run_json("replay", str(path), *window, "--overhead", "5000")
    assert plain_fit["over_budget_requests"] == 0
    above = sum(v["above_window"] for v in over["refusals"]["refused"])
    assert over["summary"]["over_budget_requests"] == above == len(over["requests"])
    assert run("replay", "--full", str(path), "--overhead", "-1").exit_code != 0


@pytest.mark.skipif(not REAL_SESSION.is_dir(), reason="the recorded session is in ../shared")
def test_the_recorded_session_shows_its_real_window_and_cache() -> None:
    report = run_json("replay", str(REAL_SESSION))
    summary = report["summary"]
    budget = report["budget"]
    aside = budget["tool_definitions_tokens"] + budget["learned_overhead_tokens"]
    assert summary["budget"] == 300_000 - aside
    assert summary["cache_breaks"] == 8
    assert summary["cache_break_causes"] == {"tail injection moved": 8}
    # Priced from the recorded usage at Opus 4.8's rates ($5/MTok, writes 1.25x, reads 0.1x):
    # 243,681 base-price tokens, $1.22; the eight moved injections rewrote what was shared.
    assert summary["priced_input_tokens"] == pytest.approx(243_681.2, abs=1)
    assert summary["input_usd"] == pytest.approx(243_681.2 * 5 / 1e6, abs=1e-5)
    assert 0.05 < summary["break_cost_share"] < 0.15
    priced = [r["priced_input_tokens"] for r in report["cache"]["requests"]]
    assert sum(priced) == pytest.approx(summary["priced_input_tokens"], abs=1)
    assert summary["cache_read_share"] == round(67_190 * 8 / 689_467, 4)
    for w in report["window_by_category"]:
        assert abs(w["gap"]) <= 0.02 * w["provider"], "our estimate is within 2% of the bill"
        assert w["categories"]["ephemeral injections"] > 6_000
    # The recorded tool definitions reach the budget, priced as the window table prices them.
    last = list(read_session(REAL_SESSION).requests())[-1]
    priced = estimate_tool_definitions(last.payload["tools"], "claude47")
    assert budget["tool_definitions_tokens"] == priced == 30_312
    assert report["window_by_category"][-1]["categories"]["tool definitions"] == priced


def test_inspect_counts_the_recorded_system_prompt_as_added_by_the_view(tmp_path: Path) -> None:
    result = run("inspect", str(make_session(tmp_path / "s")), "--at", "5")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "9 of 9 history messages + 1 added by the view" in out


def test_sweep_says_the_recorded_cache_breaks_are_outside_the_settings(tmp_path: Path) -> None:
    session = str(make_session(tmp_path / "s"))
    result = run("sweep", session, "--compact-threshold", "0.6,0.9")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "broke the provider's cache 4 time(s) (4 tail injection moved)" in out
    steady = run("sweep", str(make_session(tmp_path / "t", inject=False)), "--max-tokens", "9000")
    assert "broke the provider's cache" not in " ".join(steady.stdout.split())


def test_the_chart_series_follow_the_windows_compactions_and_cache_breaks(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s")
    session = read_session(directory)
    messages = [json.loads(line) for line in session.transcript.read_text().splitlines()]
    config = ContextConfig(max_tokens=1_900, protected_tool_results=0, token_family="claude47")
    outcome = asyncio.run(replay(messages, config=config, window=None, recorded=session.requests()))
    report = outcome.report
    series = window_series(report)
    assert series.requests == [r.request for r in report.requests] == [1, 2, 3, 4, 5]
    assert series.window == 1_900, "no window simulated: the categories fill the budget"
    assert series.cache_breaks == [2, 3, 4, 5]
    assert series.compactions == [c.request for c in report.compactions] != []
    held = [dict(e.window.categories()) for e in report.windows]
    assert series.categories["tool definitions"] == [h["tool definitions"] for h in held]
    assert list(series.categories)[-2:] == ["free space", "kept back for output"]


def test_the_summary_and_the_settings_agree_on_where_the_budget_came_from(tmp_path: Path) -> None:
    directory = str(make_session(tmp_path / "s"))
    for flags, expected in (((), "session events"), (("--max-tokens", "50000"), "flag")):
        report = run_json("replay", directory, *flags)
        (setting,) = [s for s in report["source"]["settings"] if s["name"] == "budget"]
        assert report["summary"]["budget_source"] == setting["source"] == expected


def _true_usage(overhead: int) -> Callable[[int, dict[str, Any]], dict[str, int]]:
    """Usage as a provider would count the payload: its messages, system and tools, plus
    ``overhead`` tokens of framing the estimate does not see."""

    def usage(_: int, payload: dict[str, Any]) -> dict[str, int]:
        family = "claude47"
        counted = sum(estimate_message_tokens(m, family=family) for m in payload["messages"])
        counted += estimate_message_tokens({"role": "system", "content": payload["system"]})
        counted += estimate_tool_definitions(payload.get("tools", []), family)
        return {"input_tokens": counted + overhead, "cache_write_tokens": 0, "output_tokens": 9}

    return usage


def test_a_replay_that_compacts_learns_no_overhead_from_what_it_left_out(tmp_path: Path) -> None:
    # The session sent its whole history every time; a replay under a smaller cap compacts,
    # and a reading of the whole history set beside its smaller view would look like overhead.
    directory = str(make_session(tmp_path / "s", rounds=14, usage=_true_usage(1_000)))
    whole = run_json("replay", directory)
    assert whole["summary"]["compactions"] == 0
    learned = whole["budget"]["learned_overhead_tokens"]
    capped = run_json("replay", directory, "--max-tokens", "4000")
    assert capped["summary"]["compactions"] > 0
    assert capped["budget"]["learned_overhead_tokens"] <= learned + 256
    notes = " ".join(capped["source"].get("session_notes", []))
    assert "recorded reading(s) not given to the replay's meter" in notes


def test_readings_after_the_sessions_own_compaction_teach_no_overhead(tmp_path: Path) -> None:
    # The session compacted at request 7: from then on its payloads carry the notice and only
    # the latest messages, so their readings are far below the whole history the replay sends.
    directory = make_session(tmp_path / "s", rounds=14, usage=_true_usage(3_000))
    events = directory / "context-intelligence" / "events.jsonl"
    lines = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    notice = {
        "role": "user",
        "content": '<system-reminder source="context-compaction">Earlier turns were left out.'
        "</system-reminder>",
    }
    number, usage = 0, _true_usage(3_000)
    for i, event in enumerate(lines):
        if event["event"] == "llm:request":
            number += 1
            payload = event["data"]["raw"]
            if number >= 7:
                payload["messages"] = [payload["messages"][0], notice, *payload["messages"][-2:]]
            lines[i + 1]["data"]["usage"] = usage(number, payload)
    events.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    replayed = run_json("replay", str(directory))
    assert replayed["summary"]["compactions"] == 0  # the replay's own views stay whole
    # Learned from the six readings of whole payloads; the later ones would have pulled it down.
    assert replayed["budget"]["learned_overhead_tokens"] >= 3_000 - 256
    notes = " ".join(replayed["source"].get("session_notes", []))
    assert "recorded reading(s) not given to the replay's meter" in notes
