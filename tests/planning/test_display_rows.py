"""Display-only rows are no request points: a resume and a replay find the running session's.

Amplifier stores rows the user was shown (``metadata.amplifier_public_reference_only``) beside
the messages a model executes. An orchestrator asks for a view only before a model's answer,
so a display row, of any role and wherever it sits (between a call and its result included),
must neither plan an escalation in a resume walk nor count as a request in a replay.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.vocabulary._public import REFERENCE_ONLY_KEY, answers_a_request

from ..conftest import Recorder
from ..notice_moves import is_notice
from ..replay.cli_runs import run_json
from ..replay.test_session_dir import (
    SYSTEM,
    conversation,
    request_events,
    session_config,
    write_lines,
)
from ..test_protocols import without_timestamps
from ..test_provider_views import PROPERTY_SETTINGS, Session, sessions
from .test_when_to_compact import assert_every_resume_sends_the_running_view

Msg = dict[str, Any]
ROLES = ("system", "user", "assistant", "tool")


def display(role: str, text: str) -> Msg:
    return {"role": role, "content": text, "metadata": {REFERENCE_ONLY_KEY: True}}


def write_and_test_session() -> list[Msg]:
    """Issue 37's session: four write_file + pytest pairs, each call followed by a display row
    "Running ..." before its result."""
    history: list[Msg] = [
        {"role": "user", "content": "Write the module and its tests, then make them pass."}
    ]
    for k in range(1, 5):
        source = "def f(x):\n    return x + 1\n" * 50
        history += [
            {
                "role": "assistant",
                "content": f"Writing part {k}.",
                "tool_calls": [
                    {
                        "id": f"w{k}",
                        "tool": "write_file",
                        "arguments": {"path": f"src/part{k}.py", "content": source},
                    }
                ],
            },
            display("assistant", f"Running write_file src/part{k}.py ..."),
            {"role": "tool", "tool_call_id": f"w{k}", "content": f"wrote src/part{k}.py"},
            {
                "role": "assistant",
                "content": f"Testing part {k}.",
                "tool_calls": [{"id": f"p{k}", "tool": "bash", "arguments": {"cmd": "pytest"}}],
            },
            display("assistant", "Running pytest -q ..."),
            {
                "role": "tool",
                "tool_call_id": f"p{k}",
                "content": "tests/test_part.py::test_f PASSED\n" * 150,
            },
        ]
    history.append({"role": "assistant", "content": "All four parts pass."})
    return history


ISSUE_BUDGET = 8_500


def _reductions(manager: SimpleContextManager) -> tuple[list[int], list[int]]:
    decisions = manager.decisions
    return sorted(decisions.removed), sorted({*decisions.truncated, *decisions.stubbed})


async def test_the_issue_session_resumes_to_the_running_view() -> None:
    history = write_and_test_session()
    fourth_test_run = next(
        i for i, m in enumerate(history) if m.get("tool_calls", [{}])[0].get("id") == "p4"
    )
    running = SimpleContextManager()
    for position, message in enumerate(history[:fourth_test_run]):
        if answers_a_request(message) and position > 0:
            await running.get_messages_for_request(token_budget=ISSUE_BUDGET)
        await running.add_message(copy.deepcopy(message))
    stored = copy.deepcopy(await running.get_messages())
    view = await running.get_messages_for_request(token_budget=ISSUE_BUDGET)
    resumed = SimpleContextManager()
    await resumed.set_messages(stored)
    again = await resumed.get_messages_for_request(token_budget=ISSUE_BUDGET)
    # The issue's figures: the running session leaves out [1, 3, 4, 6] and shortens [12]
    # (the issue's 8,000 tokens; 8,500 since a notice counts its map's whole room).
    assert _reductions(running) == ([1, 3, 4, 6], [12])
    assert _reductions(resumed) == _reductions(running)
    assert json.dumps(again) == json.dumps(view)


@st.composite
def with_display_rows(draw: st.DrawFn) -> Session:
    """A generated session with display-only rows of every role inserted anywhere."""
    session = draw(sessions())
    messages = list(session.messages)
    for role in ROLES:
        for _ in range(draw(st.integers(1, 2))):
            at = draw(st.integers(0, len(messages)))
            messages.insert(at, display(role, f"Running ({role}) ..."))
    session.messages = messages
    return session


@PROPERTY_SETTINGS
@given(with_display_rows())
def test_a_resume_with_display_rows_anywhere_sends_the_running_view(session: Session) -> None:
    assert_every_resume_sends_the_running_view(session)


def _write_jsonl(path: Path, rows: list[Msg]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_replay_makes_a_request_only_before_a_model_answer(tmp_path: Path) -> None:
    history = write_and_test_session()
    real = [i for i, m in enumerate(history) if answers_a_request(m)]
    report = run_json("replay", str(_write_jsonl(tmp_path / "t.jsonl", history)))
    assert [r["at_message"] for r in report["requests"]] == real
    assert report["summary"]["requests"] == len(real) == 9


def test_a_session_pairs_its_recorded_requests_with_the_views_that_answered_them(
    tmp_path: Path,
) -> None:
    # Each call of a recorded session is followed by a display row before its result.
    messages: list[Msg] = []
    for row in conversation(2):
        messages.append(row)
        if row.get("tool_calls"):
            messages.append({**display("assistant", "Running bash ..."), "timestamp": "t"})
    directory = tmp_path / "s"
    write_lines(directory / "transcript.jsonl", messages)
    write_lines(directory / "events.jsonl", [session_config(), *request_events(4)])
    report = run_json("replay", str(directory))
    assert report["source"]["recorded_match"] == {"recorded": 4, "replayed": 4, "matched": 4}
    # Request 2 is the one answered by the first reply: it carries the recorded second
    # request's system prompt and ends with the result the reply read.
    inspected = run_json("inspect", str(directory), "--at", "2")
    view = inspected["view"]
    assert view[0]["content"] == SYSTEM + "1"
    assert view[-1]["role"] == "tool" and view[-1]["tool_call_id"] == "call_0"


def _turns_closed_by_display_rows(with_rows: bool, everywhere: bool = False) -> list[Msg]:
    """Turns of a prompt, reads and a closing answer, each answer followed by the display row
    of what the user was shown (``with_rows``); ``everywhere``: one after every message."""
    history: list[Msg] = []
    for turn in range(8):
        history.append({"role": "user", "content": f"Check module {turn}."})
        for read in range(1 + turn % 3):
            call_id = f"r{turn}_{read}"
            history += [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": call_id, "tool": "read_file", "arguments": {"n": read}}],
                },
                {"role": "tool", "tool_call_id": call_id, "content": f"line {turn}\n" * 120},
            ]
        history.append({"role": "assistant", "content": f"Module {turn} is fine. " * 30})
        if with_rows:
            history.append(display("assistant", f"Shown: module {turn} checked"))
    if not everywhere:
        return history
    spread: list[Msg] = []
    for k, message in enumerate(history):
        spread += [message, display(ROLES[k % len(ROLES)], f"Shown: step {k}")]
    return spread


async def _views(history: list[Msg], budget: int) -> list[str]:
    """The view at each request, then the figures of each escalation that do not name a
    position (display rows move positions, not sizes)."""
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    views: list[str] = []
    for position, message in enumerate(history):
        if answers_a_request(message) and position > 0:
            view = await manager.get_messages_for_request(token_budget=budget)
            # A notice counts the history's messages, display rows included: its place stays.
            shown = ["notice" if is_notice(m) else m for m in without_timestamps(view)]
            views.append(json.dumps(shown))
        await manager.add_message(copy.deepcopy(message))
    sizes = (
        *("before_tokens", "after_tokens", "messages_removed", "messages_truncated"),
        *("user_messages_stubbed", "reason", "at_turn_start", "thinking_blocks_after_edit"),
    )
    events = recorder.named("context:compaction")
    return views + [json.dumps([event[key] for key in sizes]) for event in events]


async def test_display_rows_after_closing_answers_change_no_view() -> None:
    # A turn's expected growth leaves out its closing answers (no request of the turn sends
    # them), and the display rows among them: the turn-start rule decides the same with them.
    for budget in range(3_000, 9_001, 500):
        plain = await _views(_turns_closed_by_display_rows(False), budget)
        assert await _views(_turns_closed_by_display_rows(True), budget) == plain, budget


async def test_display_rows_between_every_two_messages_change_no_view_and_no_figure() -> None:
    for budget in (3_000, 5_000, 11_500):
        plain = await _views(_turns_closed_by_display_rows(False), budget)
        spread = _turns_closed_by_display_rows(False, everywhere=True)
        assert await _views(spread, budget) == plain, budget
