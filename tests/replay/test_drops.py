"""What each compaction dropped: the replay's drop records against the views themselves, and
``inspect --at`` / ``inspect --why`` naming what left."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from amplifier_module_context_simple import ContextConfig, SimpleContextManager
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.engine.engine import replay
from amplifier_module_context_simple.replay.findings.drops import (
    ARGUMENT_CHARS,
    LEFT,
    RESTORED,
    SHORTENED,
    STUBBED,
    WHOLE,
    Drop,
    PositionIndex,
    call_text,
    drops_at,
    first_line,
    main_argument,
    tool_names,
)
from amplifier_module_context_simple.replay.output.findings_output import (
    DROP_ROWS,
    render_drops,
    render_left_out,
)
from amplifier_module_context_simple.replay.provider.simulation import SimulatedProvider, Window

TOOLS = ("read_file", "bash", "grep")
runner = CliRunner()


def session(sizes: list[int], *, prompt_every: int = 4) -> list[dict[str, Any]]:
    """A coding session: one tool round per size (a result of about that many words), a long
    follow-up prompt every few rounds, and a closing answer."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the failing parser test.\nIt fails since Monday."}
    ]
    for i, size in enumerate(sizes):
        call = f"call_{i}"
        tool = TOOLS[i % len(TOOLS)]
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}: run {tool}.",
                "tool_calls": [
                    {"id": call, "tool": tool, "arguments": {"n": i, "path": f"src/m{i}.py"}}
                ],
            }
        )
        body = " ".join(f"w{i}x{j}" for j in range(size))
        messages.append({"role": "tool", "tool_call_id": call, "content": f"out {i}\n{body}"})
        if i % prompt_every == prompt_every - 1:
            messages.append({"role": "user", "content": f"Also check module {i}. " + "ok " * 400})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _form(copy: dict[str, Any] | None) -> str:
    if copy is None:
        return LEFT
    if copy.get("_stubbed"):
        return STUBBED
    return SHORTENED if copy.get("_truncated") else WHOLE


async def views_forms(
    messages: list[dict[str, Any]], config: ContextConfig, window: Window | None
) -> list[dict[int, str]]:
    """Driving the manager directly: each request's form of every history position, found by
    the metadata dict a view message shares with its history message."""
    manager = SimpleContextManager(**asdict(config))
    provider = SimulatedProvider(window) if window is not None else None
    found: list[dict[int, str]] = []
    for message in messages:
        if message["role"] == "assistant":
            view = await manager.get_messages_for_request(provider=provider)
            by_meta = {id(m.get("metadata")): m for m in view}
            found.append(
                {p: _form(by_meta.get(id(h["metadata"]))) for p, h in enumerate(manager.messages)}
            )
        await manager.add_message(dict(message))
    return found


def expected_changes(forms: list[dict[int, str]]) -> set[tuple[int, int, str]]:
    """(position, request, change) from consecutive views; a new message starts as 'new'."""
    changes: set[tuple[int, int, str]] = set()
    previous: dict[int, str] = {}
    for request, now in enumerate(forms, 1):
        for position, form in now.items():
            before = previous.get(position, "new")
            if before == form or (before == "new" and form == WHOLE):
                continue
            if before == LEFT:
                changes.add((position, request, RESTORED))
            else:
                changes.add((position, request, form))
        previous = now
    return changes


async def test_drop_records_match_the_views() -> None:
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 3)
    config = ContextConfig()
    window = Window(context_window=14_000, max_output_tokens=2_000)
    report = (await replay(messages, config=config, window=window)).report
    assert report.compactions, "the window should force compactions"
    forms = await views_forms(messages, config, window)
    assert len(forms) == len(report.requests)
    got = {(d.position, d.request, d.change) for d in report.drops}
    assert got == expected_changes(forms)
    changes = {d.change for d in report.drops}
    assert {LEFT, SHORTENED} <= changes
    for d in report.drops:
        # Left at request k: in view k-1 (or added since) and not in view k.
        if d.change == LEFT:
            assert forms[d.request - 1][d.position] == LEFT
            assert d.request == 1 or forms[d.request - 2].get(d.position, WHOLE) != LEFT
            assert d.tokens_after == 0 < d.tokens_before
        if d.change in (SHORTENED, STUBBED):
            assert d.tokens_after < d.tokens_before
        compacted = {c.request: c.level for c in report.compactions}
        if d.compacted:
            assert d.level == compacted[d.request]
    assert report.summary()["dropped_messages"] == len({d.position for d in report.drops})


async def test_a_dropped_tool_result_names_its_tool_role_and_first_line() -> None:
    messages = session([900] * 12)
    report = (await replay(messages, config=ContextConfig(max_tokens=6_000), window=None)).report
    results = [d for d in report.drops if d.role == "tool"]
    assert results
    for d in results:
        call_id = messages[d.position]["tool_call_id"]
        (call,) = [m for m in messages if m.get("tool_calls", [{}])[0].get("id") == call_id]
        assert d.tool == call["tool_calls"][0]["tool"]
        assert d.call_argument == call["tool_calls"][0]["arguments"]["path"]
        assert d.first_line == messages[d.position]["content"].splitlines()[0]
    calls = [d for d in report.drops if d.role == "assistant"]
    assert all(d.tool in TOOLS for d in calls)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(1, 1_500), min_size=3, max_size=24),
    st.integers(2_500, 20_000),
    st.sampled_from([0.5, 0.8, 0.92]),
    st.integers(2, 6),
)
async def test_drop_records_match_the_views_on_any_session(
    sizes: list[int], cap: int, threshold: float, prompt_every: int
) -> None:
    messages = session(sizes, prompt_every=prompt_every)
    config = ContextConfig(max_tokens=cap, compact_threshold=threshold, target_usage=0.4)
    report = (await replay(messages, config=config, window=None)).report
    forms = await views_forms(messages, config, None)
    assert {(d.position, d.request, d.change) for d in report.drops} == expected_changes(forms)
    # Linear in the history: a message changes form at most a few times.
    per_position: dict[int, int] = {}
    for d in report.drops:
        per_position[d.position] = per_position.get(d.position, 0) + 1
    assert max(per_position.values(), default=0) <= 4


def test_position_index_is_the_same_built_at_once_or_in_steps() -> None:
    history = session([5, 5, 5, 5])
    for m in history:
        m["metadata"] = {}
    whole, steps = PositionIndex(), PositionIndex()
    whole.sync(history)
    for end in range(1, len(history) + 1):
        assert list(steps.sync(history[:end])) == [end - 1]
    for position, message in enumerate(history):
        assert whole.locate(message) == steps.locate(message) == position
        copy = {**message, "content": "shortened"}  # shares the metadata dict
        assert steps.locate(copy) == position
    assert steps.locate({"role": "user", "content": "x", "metadata": {}}) is None
    assert steps.tool(history[2]) == "read_file" and steps.tool(history[4]) == "bash"


# --- the command ----------------------------------------------------------------------------


def _transcript(tmp_path: Path, messages: list[dict[str, Any]]) -> str:
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return str(path)


SMALL_WINDOW = ["--context-window", "14000", "--max-output-tokens", "2000"]


def test_inspect_why_names_the_request_and_level_a_message_left_at(tmp_path: Path) -> None:
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 3)
    path = _transcript(tmp_path, messages)
    result = runner.invoke(app, ["replay", path, *SMALL_WINDOW, "--json"])
    assert result.exit_code == 0, result.stderr
    drops = [Drop(**d) for d in json.loads(result.stdout)["drops"]]
    left = next(d for d in drops if d.change == LEFT and d.compacted)

    why = runner.invoke(app, ["inspect", path, *SMALL_WINDOW, "--why", str(left.position)])
    assert why.exit_code == 0, why.stderr
    out = " ".join(why.stdout.split())
    assert f"Message {left.position} " in out
    assert f"request {left.request}: left out by the compaction at level {left.level}" in out
    as_json = runner.invoke(
        app, ["inspect", path, *SMALL_WINDOW, "--why", str(left.position), "--json"]
    )
    changes = json.loads(as_json.stdout)["changes"]
    assert [Drop(**c) for c in changes] == drops_at(drops, left.position)

    # The first prompt is never left out.
    kept = runner.invoke(app, ["inspect", path, *SMALL_WINDOW, "--why", "0"])
    assert kept.exit_code == 0, kept.stderr
    assert "never left the view" in kept.stdout and "Fix the failing parser test." in kept.stdout
    assert 0 not in {d.position for d in drops}
    # The closing answer comes after the last request.
    last = runner.invoke(app, ["inspect", path, *SMALL_WINDOW, "--why", str(len(messages) - 1)])
    assert "no request came after it" in last.stdout


def test_inspect_why_and_at_are_checked(tmp_path: Path) -> None:
    path = _transcript(tmp_path, session([10, 10]))
    for args, needle in (
        ([], "--at N"),
        (["--at", "1", "--why", "0"], "not both"),
        (["--why", "99"], "--why 99 is not a history position"),
        (["--why", "-1"], "--why -1"),
    ):
        result = runner.invoke(app, ["inspect", path, *args])
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert needle in result.stderr and "Traceback" not in result.stderr


def test_inspect_at_names_what_was_left_out(tmp_path: Path) -> None:
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 3)
    path = _transcript(tmp_path, messages)
    report = json.loads(runner.invoke(app, ["replay", path, *SMALL_WINDOW, "--json"]).stdout)
    request = max(r["request"] for r in report["requests"] if r["left_out"])
    left = [d for d in report["drops"] if d["change"] == LEFT and d["request"] <= request]
    # Wide enough that no cell is shortened: what the row says, not how it fits.
    result = runner.invoke(
        app, ["inspect", path, *SMALL_WINDOW, "--at", str(request)], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.stderr
    table = result.stdout.split("What this view left out (", 1)[1]
    first = min(left, key=lambda d: d["position"])
    row = next(line for line in table.splitlines() if line.split()[:1] == [str(first["position"])])
    assert first["role"] in row and f"req {first['request']}" in row
    assert first["first_line"] in row
    if first["tool"]:
        assert first["tool"] in row
    results = [d for d in left if d["role"] == "tool"]
    assert results, "the session leaves tool results out"
    shown = [
        line for line in table.splitlines() if line.split()[:1] == [str(results[0]["position"])]
    ]
    assert f"{results[0]['tool']} {results[0]['call_argument']}" in shown[0]


async def test_drop_and_left_out_tables_fit_80_columns() -> None:
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 3)
    window = Window(context_window=14_000, max_output_tokens=2_000)
    outcome = await replay(messages, config=ContextConfig(), window=window, stop_at=20)
    report = outcome.report
    console = Console(width=80, record=True, highlight=False)
    render_drops(console, report)
    positions = sorted({d.position for d in report.drops if d.change == LEFT})
    render_left_out(console, outcome.history, positions, report.drops, family=None)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    for header in ("req", "pos", "role", "call", "tokens", "left at", "first line"):
        assert f" {header} " in text
    by_request: dict[int, list[Drop]] = {}
    for d in report.drops:
        by_request.setdefault(d.request, []).append(d)
    for drops in by_request.values():  # the rows shown: every figure whole
        for d in sorted(drops, key=lambda d: (-d.tokens_before, d.position))[:DROP_ROWS]:
            assert f" {d.position} " in text
            assert f"{d.tokens_before:,} → {d.tokens_after:,}" in text


async def test_a_message_no_view_ever_sent_left_at_the_first_request_after_it() -> None:
    # A result whose call is not in the history: the view leaves it out (a pairing repair).
    stray = {"role": "tool", "tool_call_id": "no_such_call", "content": "late output\nmore"}
    messages = session([20, 20])
    messages.insert(3, stray)
    report = (await replay(messages, config=ContextConfig(), window=None)).report
    assert report.compactions == []
    forms = await views_forms(messages, ContextConfig(), None)
    assert {(d.position, d.request, d.change) for d in report.drops} == expected_changes(forms)
    (drop,) = report.drops
    assert (drop.position, drop.change, drop.compacted) == (3, LEFT, False)
    assert drop.request == 2 and drop.first_line == "late output" and drop.tool == "?"
    assert drop.tokens_before > 0 == drop.tokens_after
    console = Console(width=80, record=True, highlight=False)
    render_drops(console, report)
    text = console.export_text()
    assert "   2°     3 " in text and "° no compaction at that request" in " ".join(text.split())


def test_a_call_stored_in_both_shapes_is_named_once() -> None:
    call = {"id": "toolu_1", "tool": "bash", "name": "bash", "arguments": {}}
    block = {"type": "tool_call", "id": "toolu_1", "name": "bash", "input": {}}
    other = {"type": "tool_call", "id": "toolu_2", "name": "grep", "input": {}}
    stored = {"role": "assistant", "content": [block, other], "tool_calls": [call]}
    assert tool_names(stored) == ["bash", "grep"]
    assert tool_names({"role": "assistant", "content": [block]}) == ["bash"]


LINE_TEXT = st.text(
    alphabet=st.sampled_from(list(" \t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\u00a0ab…"))
)


@settings(max_examples=300)
@given(LINE_TEXT, st.integers(2, 12))
def test_first_line_is_the_first_non_blank_line_stripped(text: str, limit: int) -> None:
    # What str.splitlines() calls a line, whatever ends it (\r\n, \x85, \u2028 ...).
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    expected = line if len(line) <= limit else line[: limit - 1] + "…"
    assert first_line({"role": "user", "content": text}, limit) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"content": "x = 1", "file_path": "src/a.py"}, "src/a.py"),  # the path over the body
        ({"todos": [], "action": "update"}, "update"),
        ({"command": "  \n pytest -q\n echo done"}, "pytest -q"),  # its first non-blank line
        ('{"pattern": "def main", "path": "src"}', "src"),  # OpenAI's JSON text
        ({"limit": 3, "note": "why"}, "why"),  # no telling name: the first text argument
        ({"limit": 3}, None),
        ("not json", None),
        ({}, None),
        ({"path": "p" * 100}, "p" * (ARGUMENT_CHARS - 1) + "…"),
    ],
)
def test_main_argument_names_what_the_call_was_about(
    arguments: object, expected: str | None
) -> None:
    assert main_argument(arguments) == expected


def test_a_block_call_and_an_openai_call_name_their_argument_beside_the_result() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "x"}}
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "hit"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c2", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "a b"},
    ]
    index = PositionIndex()
    index.sync(history)
    assert [index.call_argument(m) for m in history] == [None, None, "x", None, "ls"]
    assert call_text(index.tool(history[4]), index.call_argument(history[4])) == "bash ls"


async def test_the_drop_table_shows_the_call_beside_each_dropped_result() -> None:
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 3)
    window = Window(context_window=14_000, max_output_tokens=2_000)
    report = (await replay(messages, config=ContextConfig(), window=window)).report
    console = Console(width=160, record=True, highlight=False)
    render_drops(console, report)
    rows = console.export_text().splitlines()
    shown = [d for d in report.drops if d.role == "tool"]
    assert shown
    for d in shown:
        row = [r for r in rows if f" {d.tokens_before:,} → {d.tokens_after:,} " in r]
        if row:  # among the largest of its request, so listed
            assert any(f" {d.tool} {d.call_argument} " in r for r in row), d
