"""Retention by the manager (any iterable of bodies, never one string) and ``hard_fit``'s
last check (``check_fits``): a view fits up to its budget exactly, and a request whose fixed parts
leave no room says what to change."""

from __future__ import annotations

from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.planning._plan import RequestPlan
from amplifier_module_context_simple.readings._meter_stats import MeterStats
from amplifier_module_context_simple.session._retention import check_fits, resolve_retained
from amplifier_module_context_simple.sizing._budget_record import Budget
from amplifier_module_context_simple.views._decisions import NO_DECISIONS

from ..notice_moves import is_notice
from ..provider_rules import provider_violations

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
    with pytest.raises(ContextLengthError, match=f"needs ~{BUDGET + 1} tokens") as caught:
        check_fits(_plan(BUDGET + 1))
    assert (
        "after every compaction step; the system prompt, the first and latest prompts and the "
        "retained reminders cannot be reduced"
    ) in str(caught.value)


_SIX = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 100}
    for i in range(6)
]


async def _sent_whole(budget: int, **config: Any) -> bool:
    """Whether a hard-fit request at ``budget`` sends ``_SIX`` whole."""
    manager = SimpleContextManager(**config)
    for message in _SIX:
        await manager.add_message(dict(message))
    view = await manager.get_messages_for_request_retaining(
        retain_contents=[], token_budget=budget, hard_fit=True
    )
    return len(view) == len(_SIX) and manager.decisions.escalations == 0


async def test_with_notices_off_a_hard_fit_view_fills_its_budget_to_the_token() -> None:
    # No notice can be added, so none is reserved: a view estimated at exactly the budget is
    # sent whole, and one token less reduces it.
    size = sum(estimate_message_tokens(m) for m in _SIX)
    assert await _sent_whole(size, compaction_notice_enabled=False)
    assert not await _sent_whole(size - 1, compaction_notice_enabled=False)


async def test_a_hard_fit_view_leaves_room_for_the_notice_at_its_verbosity() -> None:
    # What is held back for a notice is the longest one at the configured verbosity: the
    # smallest budget that sends the view whole grows with it.
    async def smallest_whole(verbosity: str) -> int:
        low, high = 0, 10_000
        while low < high:
            middle = (low + high) // 2
            if await _sent_whole(middle, compaction_notice_verbosity=verbosity):
                high = middle
            else:
                low = middle + 1
        return low

    smallest = [await smallest_whole(v) for v in ("minimal", "normal", "verbose")]
    assert smallest == sorted(set(smallest)), smallest


def test_a_starved_request_names_what_would_make_room() -> None:
    with pytest.raises(ContextLengthError) as caught:
        check_fits(_plan(BUDGET + 1, starved=True))
    assert str(caught.value).endswith(
        "send fewer or smaller tools, ask for less output, or use a larger window"
    )


REMINDER = "<system-reminder>keep me</system-reminder>"
ENVELOPE = {"role": "user", "content": REMINDER, "metadata": {"ephemeral": True, "persisted": True}}


async def _manager(history: list[dict[str, Any]]) -> SimpleContextManager:
    manager = SimpleContextManager(protected_recent=0.0)
    for message in history:
        await manager.add_message(message)
    return manager


async def test_the_bodies_may_come_from_any_iterable_read_once() -> None:
    history = [
        {"role": "user", "content": "first"},
        ENVELOPE,
        *({"role": "user", "content": f"filler {i} " + "w " * 300} for i in range(6)),
        {"role": "user", "content": "last"},
    ]
    manager = await _manager(history)
    view = await manager.get_messages_for_request_retaining(
        retain_contents=iter([REMINDER]), token_budget=1_500
    )
    assert manager.compaction_level > 0
    assert any(m.get("content") == REMINDER for m in view), "the named reminder is kept"


async def test_one_string_is_refused_as_a_string() -> None:
    manager = await _manager([{"role": "user", "content": "first"}, ENVELOPE])
    with pytest.raises(TypeError) as caught:
        await manager.get_messages_for_request_retaining(retain_contents=REMINDER)
    assert str(caught.value) == "retain_contents must be a collection of strings, not one string"


def test_a_body_that_is_not_text_is_named_by_its_type() -> None:
    bodies: list[Any] = [REMINDER, 7]
    with pytest.raises(TypeError) as caught:
        resolve_retained([ENVELOPE], bodies)
    assert str(caught.value) == "retain_contents holds a int, expected str"


def test_bodies_never_admitted_are_counted_and_one_is_shown() -> None:
    with pytest.raises(ValueError) as caught:
        resolve_retained([ENVELOPE], [REMINDER, "b" * 90, "a" * 90])
    assert str(caught.value) == (
        "retain_contents names 2 reminder(s) that were never admitted as a persisted ephemeral "
        f"user message, e.g. {'a' * 80!r}"
    )
    with pytest.raises(ValueError, match="names 1 reminder"):
        resolve_retained([], [REMINDER])  # an empty history holds none
    for flags in ({"ephemeral": True}, {"persisted": True}):  # an envelope carries both
        half = {**ENVELOPE, "metadata": flags}
        with pytest.raises(ValueError, match="names 1 reminder"):
            resolve_retained([half], [REMINDER])


async def test_a_history_that_never_settles_is_refused_by_name() -> None:
    first = [{"role": "user", "content": "first"}, ENVELOPE, {"role": "user", "content": "x"}]
    moved = [first[0], first[2], ENVELOPE]
    manager = await _manager(first)
    turns = iter(range(100))

    async def factory() -> str:
        # Each plan sees the reminder somewhere else: it never rests where it was planned.
        await manager.set_messages(moved if next(turns) % 2 == 0 else first)
        return "system"

    await manager.set_system_prompt_factory(factory)
    with pytest.raises(RuntimeError) as caught:
        await manager.get_messages_for_request_retaining(retain_contents=[REMINDER])
    assert str(caught.value) == (
        "context-simple: the history kept changing while a request was planned"
    )


LONG_REMINDER = "<system-reminder>keep me " + "w " * 200 + "</system-reminder>"


async def _compacted_reminder_session(
    rounds: int = 10,
) -> tuple[SimpleContextManager, list[dict[str, Any]]]:
    """A long reminder early in the session, then tool rounds at 3,000 tokens: the
    escalations leave out the reminder and the rounds after it, and a notice stands."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "fix the parser"},
        {**ENVELOPE, "content": LONG_REMINDER},
    ]
    for k in range(rounds):
        call = {"id": f"call_{k}", "tool": "read_file", "arguments": {"path": f"src/m{k}.py"}}
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"call_{k}", "content": "x " * 400})
    manager = SimpleContextManager()
    for message in history:
        if message["role"] == "assistant":
            await manager.get_messages_for_request(token_budget=3_000)
        await manager.add_message(message)
    return manager, history


async def test_a_retained_reminder_shown_again_comes_before_the_notice_not_after_it() -> None:
    """Escalations left out a long reminder early in the session and the rounds after it;
    the notice stands where the latest of them began. A request retaining the reminder shows
    it whole, in its place: before the notice, which still comes right before the message it
    came before in the request without retention."""
    manager, history = await _compacted_reminder_session()
    plain = await manager.get_messages_for_request(token_budget=3_000)
    decisions = manager.decisions
    assert 1 in decisions.removed and decisions.escalations > 1, "the test needs both"
    retaining = await manager.get_messages_for_request_retaining(
        retain_contents=[LONG_REMINDER], token_budget=3_000
    )
    assert manager.decisions is decisions, "the test needs no escalation for the retention"
    [at] = [i for i, m in enumerate(plain) if is_notice(m)]
    [shown_at] = [i for i, m in enumerate(retaining) if is_notice(m)]
    assert retaining[shown_at - 1]["content"] == LONG_REMINDER
    assert retaining[shown_at + 1] == plain[at + 1]
    assert provider_violations(retaining, history=history) == []


async def test_a_retaining_request_between_escalations_renders_only_what_is_new() -> None:
    """The notice's place is rendered once per escalation in a retaining session too: a
    request that escalates nothing renders only the messages added since the previous one
    (``Planner.rendered_messages``)."""
    manager, _ = await _compacted_reminder_session()
    between = 0
    for k in range(4):
        decisions, rendered = manager.decisions, manager.planner.rendered_messages
        await manager.get_messages_for_request_retaining(
            retain_contents=[LONG_REMINDER], token_budget=3_000
        )
        if manager.decisions is decisions and k > 0:
            between += 1
            assert manager.planner.rendered_messages - rendered <= 2, "two messages are new"
        await manager.add_message({"role": "assistant", "content": f"done {k}"})
        await manager.add_message({"role": "user", "content": f"next {k}"})
    assert between > 0, "the test needs a request between escalations"


async def test_retaining_and_plain_requests_in_turn_keep_the_notice_where_the_rounds_left() -> None:
    """Plain requests leave the reminder out, retaining ones show it; each escalates. In
    every retaining view the notice stands right after the reminder, where the rounds it
    tells of were left out, and never last (the round being worked on ends the view)."""
    manager, _ = await _compacted_reminder_session(rounds=6)
    for k in range(4):
        if k % 2:
            await manager.get_messages_for_request(token_budget=3_000)
        else:
            escalations = manager.decisions.escalations
            view = await manager.get_messages_for_request_retaining(
                retain_contents=[LONG_REMINDER], token_budget=3_000
            )
            assert manager.decisions.escalations > escalations, "the test needs an escalation"
            assert view[1]["content"] == LONG_REMINDER
            assert is_notice(view[2])
            assert view[-1]["role"] == "tool"
        call = {"id": f"more_{k}", "tool": "read_file", "arguments": {"path": f"src/x{k}.py"}}
        await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        await manager.add_message(
            {"role": "tool", "tool_call_id": f"more_{k}", "content": "y " * 400}
        )
