"""Where the compaction notice stands: in place of the left-out span (the default), or last.

In place, the notice stands before the first message rendered after the first reduced stretch
of the history, so it and everything before it stay byte-identical until the next escalation,
and the provider's prompt cache (and a preserved-thinking model's bound reasoning) survive
every request in between. It is never between a call and its results, never before tool
results in a user turn, and never the view's unanswered last message.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

import pytest
from amplifier_core import HookRegistry, HookResult
from hypothesis import given

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

from ..provider_rules import provider_violations
from ..test_provider_views import PROPERTY_SETTINGS, Session, WindowProvider, sessions

NOTICE = "context-compaction"


def is_notice(message: dict[str, Any]) -> bool:
    return (message.get("metadata") or {}).get("source") == NOTICE


def dumps(view: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in view]


async def _run(session: Session, placement: str) -> list[tuple[list[Any], list[Any], bool]]:
    """Every request of ``session``: (view, history, whether it escalated)."""
    hooks = HookRegistry()
    compactions: list[int] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        compactions.append(1)
        return HookResult(action="continue")

    hooks.register("context:compaction", record, name="placement-compactions")
    manager = SimpleContextManager(hooks=hooks, compaction_notice_placement=placement)
    provider = WindowProvider(session.window, session.max_output) if session.via_provider else None
    requests: list[tuple[list[Any], list[Any], bool]] = []
    for message in session.messages:
        if message["role"] == "assistant":
            before = len(compactions)
            if provider is not None:
                view = await manager.get_messages_for_request(provider=provider)
            else:
                view = await manager.get_messages_for_request(token_budget=session.token_budget)
            history = copy.deepcopy(await manager.get_messages())
            requests.append((copy.deepcopy(view), history, len(compactions) > before))
        try:
            await manager.add_message(copy.deepcopy(message))
        except Exception:  # admission has its own property; the views so far count
            break
    return requests


def run(session: Session, placement: str) -> list[tuple[list[Any], list[Any], bool]]:
    logging.disable(logging.WARNING)
    try:
        return asyncio.run(_run(session, placement))
    finally:
        logging.disable(logging.NOTSET)


@PROPERTY_SETTINGS
@given(sessions())
def test_in_place_views_extend_the_previous_request_whole_between_escalations(
    session: Session,
) -> None:
    requests = run(session, "in_place")
    thinking = session.thinking != "none"
    previous: list[Any] | None = None
    for number, (view, history, escalated) in enumerate(requests):
        assert check_view(view, history=history) == [], number
        assert provider_violations(view, history=history, thinking=thinking) == [], number
        # The latest notice, and at most two earlier ones that still stand where they stood.
        assert sum(map(is_notice, view)) <= 3
        if view and is_notice(view[-1]):
            assert len(view) > 1 and view[-2]["role"] in ("user", "tool"), "never after a call"
        if previous is not None and not escalated:
            assert dumps(view[: len(previous)]) == dumps(previous), f"request {number}"
        previous = view


@PROPERTY_SETTINGS
@given(sessions())
def test_the_tail_placement_is_valid_and_keeps_the_notice_last(session: Session) -> None:
    thinking = session.thinking != "none"
    for number, (view, history, _) in enumerate(run(session, "tail")):
        assert check_view(view, history=history) == [], number
        assert provider_violations(view, history=history, thinking=thinking) == [], number
        notices = [i for i, m in enumerate(view) if is_notice(m)]
        assert notices in ([], [len(view) - 1])


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": f"About {call_id}.", "signature": "s"}],
        "tool_calls": [
            {"id": f"{call_id}a", "tool": "read", "arguments": {}},
            {"id": f"{call_id}b", "tool": "read", "arguments": {}},
        ],
    }


def _results(call_id: str, lines: int) -> list[dict[str, Any]]:
    body = "compiled module_7 in 3.4s with 12 warnings\n" * lines
    return [
        {"role": "tool", "tool_call_id": f"{call_id}{k}", "name": "read", "content": body}
        for k in "ab"
    ]


@pytest.mark.parametrize("thinking", [True, False])
async def test_a_shortening_only_escalation_puts_the_notice_after_the_whole_round(
    thinking: bool,
) -> None:
    """The first reduction is a shortened result: the notice follows its round whole."""
    manager = SimpleContextManager(protected_tool_results=2, protected_recent=0.1, target_usage=0.9)
    await manager.add_message({"role": "user", "content": "Read every module."})
    for t in range(6):
        call = _call(f"c{t}")
        if not thinking:
            call["content"] = ""
        await manager.add_message(call)
        for result in _results(f"c{t}", 150):
            await manager.add_message(result)
    history = await manager.get_messages()
    # Just over the trigger, and a target that shortening two old results reaches.
    budget = int(sum(map(estimate_message_tokens, history)) * 1.05) + 800
    view = await manager.get_messages_for_request(token_budget=budget)
    decisions = manager.decisions
    assert decisions.truncated and not decisions.removed, "the test needs a shortening only"
    [at] = [i for i, m in enumerate(view) if is_notice(m)]
    first = min(decisions.truncated)
    owner = next(i for i in range(first, -1, -1) if history[i].get("tool_calls"))
    # The notice follows the owner's call and both of its results.
    assert view[at - 3] == history[owner] or view[at - 3].get("tool_calls")
    assert [m.get("tool_call_id") for m in view[at - 2 : at]] == [
        history[owner]["tool_calls"][0]["id"],
        history[owner]["tool_calls"][1]["id"],
    ]
    assert provider_violations(view, history=history, thinking=thinking) == []
    assert check_view(view, history=history) == []


async def test_the_notice_never_follows_the_call_still_being_executed() -> None:
    """Found by hypothesis (tests/test_adversarial.py): an out-of-order result after the
    trailing call put the latest reduction after it; the notice must stand before the call."""

    def calls(*ids: str | None) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": i, "tool": "bash", "arguments": {"q": ""}}
                if i
                else {"id": None, "tool": "bash"}
                for i in ids
            ],
        }

    manager = SimpleContextManager()
    for message in (
        calls("call_1", "call_2", None),
        calls("call_1", "call_4", "call_5", "call_6", None),
        {"role": "tool", "tool_call_id": "call_2", "content": "ab " * 124},
    ):
        await manager.add_message(message)
    view = await manager.get_messages_for_request(token_budget=40)
    history = await manager.get_messages()
    assert check_view(view, history=history) == []
