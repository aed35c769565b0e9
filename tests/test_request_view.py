"""Amplifier's public history never reaches a provider (issue 30).

A row with ``metadata.amplifier_public_reference_only: true`` is for display only, and
``amplifier_public_message`` / ``amplifier_public_copy_source`` carry the public copy of an
expanded message. ``request_view`` (the function modules built on this one import) drops the
first and strips the keys from a copy of the metadata; every view (plain, retaining, measured)
applies the same rule as it builds each message's sent form, and sizes what it sends. Here: the
rule itself (properties: it never mutates what it is given, and is idempotent), the views on
hand-made histories, and, on generated sessions, that display-only rows and public copies change
nothing a provider is sent: the views equal those of the history without them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from amplifier_core.message_models import Message
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.checks._invariants import ViewChecker, sent_forms
from amplifier_module_context_simple.request_view import request_view

from .test_provider_views import Session, sessions

REFERENCE_ONLY = "amplifier_public_reference_only"
PUBLIC_KEYS = ("amplifier_public_message", "amplifier_public_copy_source", REFERENCE_ONLY)
BIG = "compiler output line that keeps going\n" * 100  # ~800 tokens
REMINDER = '<system-reminder source="hooks-todo">Keep the todo list current.</system-reminder>'


def display_row(message: Mapping[str, Any]) -> dict[str, Any]:
    """What Amplifier keeps for display beside a message: the copy the user saw."""
    meta = dict(message.get("metadata") or {})
    return {**message, "metadata": {**meta, REFERENCE_ONLY: True}}


def expanded(text: str, shown: str) -> dict[str, Any]:
    """A prompt executed expanded, carrying the public copy of what the user typed."""
    return {
        "role": "user",
        "content": text,
        "metadata": {
            "amplifier_public_message": {"role": "user", "content": shown},
            "amplifier_public_copy_source": "mention-expansion",
            REFERENCE_ONLY: False,
            "_seq": 7,
        },
    }


def public_markers(view: Sequence[Mapping[str, Any]]) -> list[int]:
    """Positions of view messages that carry any key of the public history."""
    return [
        i
        for i, m in enumerate(view)
        if isinstance(m.get("metadata"), Mapping) and any(k in m["metadata"] for k in PUBLIC_KEYS)
    ]


# --- the rule ----------------------------------------------------------------------------------


def test_display_only_rows_are_dropped_and_public_keys_come_off_a_copy() -> None:
    prompt = expanded("fix <file path='a.py'>print(1)</file>", "fix @a.py")
    rows = [
        display_row({"role": "user", "content": "fix @a.py"}),
        prompt,
        {"role": "assistant", "content": "done", "metadata": {"_seq": 8}},
        {"role": "assistant", "content": "no metadata"},
        {"role": "user", "content": "odd metadata", "metadata": "not a dict"},
    ]
    stored = copy.deepcopy(rows)
    view = request_view(rows)
    assert [m["content"] for m in view] == [
        prompt["content"],
        "done",
        "no metadata",
        "odd metadata",
    ]
    assert view[0]["metadata"] == {"_seq": 7}, "_seq stays unless asked"
    assert view[1] is rows[2] and view[2] is rows[3] and view[3] is rows[4], "nothing to drop"
    assert rows == stored, "the stored rows keep every key"
    final = request_view(rows, strip_sequence=True)
    assert final[0]["metadata"] == {} and final[1]["metadata"] == {}
    assert final[2] is rows[3], "a row without dict metadata passes through as it is"


@pytest.mark.parametrize("flag", [False, None, "true", 1, "yes"])
def test_only_a_json_true_makes_a_row_display_only(flag: object) -> None:
    row = {"role": "user", "content": "kept", "metadata": {REFERENCE_ONLY: flag}}
    (sent,) = request_view([row])
    assert sent["content"] == "kept" and REFERENCE_ONLY not in sent["metadata"]


def test_a_row_that_is_not_a_mapping_is_refused_by_position() -> None:
    with pytest.raises(TypeError, match=r"message #1 \(list\) is not a mapping"):
        request_view([{"role": "user", "content": "x"}, ["role", "user"]])  # type: ignore[list-item]


def test_a_read_only_mapping_row_comes_back_as_a_dict() -> None:
    # Nothing to drop: the projection passes the row through, and the view still holds dicts.
    row = MappingProxyType({"role": "user", "content": "x"})
    [sent] = request_view([row])
    assert type(sent) is dict and sent == {"role": "user", "content": "x"}


METADATA_VALUES = st.one_of(
    st.booleans(), st.none(), st.integers(), st.text(max_size=4), st.just({"role": "user"})
)
METADATA = st.one_of(
    st.dictionaries(
        st.sampled_from([*PUBLIC_KEYS, "_seq", "source", "timestamp", "ephemeral"]),
        METADATA_VALUES,
        max_size=5,
    ),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)
ROWS = st.lists(
    st.builds(
        lambda role, content, meta, has_meta: (
            {"role": role, "content": content, "metadata": meta}
            if has_meta
            else {"role": role, "content": content}
        ),
        st.sampled_from(["user", "assistant", "tool", "system"]),
        st.text(max_size=8),
        METADATA,
        st.booleans(),
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(ROWS, st.booleans())
def test_request_view_never_mutates_and_is_idempotent(
    rows: list[dict[str, Any]], strip: bool
) -> None:
    stored = copy.deepcopy(rows)
    once = request_view(rows, strip_sequence=strip)
    assert rows == stored, "the stored rows are never changed"
    twice = request_view(once, strip_sequence=strip)
    assert twice == once
    assert all(a is b for a, b in zip(twice, once, strict=True)), "nothing left to copy"
    assert public_markers(once) == []
    kept = [r for r in rows if not (isinstance(r.get("metadata"), dict) and
                                    r["metadata"].get(REFERENCE_ONLY) is True)]  # fmt: skip
    assert len(once) == len(kept)
    for sent, row in zip(once, kept, strict=True):
        assert {k: v for k, v in sent.items() if k != "metadata"} == {
            k: v for k, v in row.items() if k != "metadata"
        }
        meta = row.get("metadata")
        if isinstance(meta, dict):
            dropped = {*PUBLIC_KEYS, *(["_seq"] if strip else [])}
            assert sent["metadata"] == {k: v for k, v in meta.items() if k not in dropped}
        else:
            assert sent is row
    assert request_view(rows, strip_sequence=strip) == once, "a pure function"


# --- the views ---------------------------------------------------------------------------------


async def session_with_public_history(manager: SimpleContextManager, rounds: int = 14) -> None:
    shown = "Refactor @parser.py please."
    await manager.add_message(display_row({"role": "user", "content": shown}))
    await manager.add_message(expanded("Refactor <file>def parse(): ...</file> please.", shown))
    await manager.add_message(
        {"role": "user", "content": REMINDER, "metadata": {"ephemeral": True, "persisted": True}}
    )
    await manager.add_message(display_row({"role": "user", "content": REMINDER}))
    for t in range(rounds):
        call = {"id": f"c{t}", "tool": "bash", "arguments": {}}
        await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        if t % 4 == 1:
            # Display-only rows inside a tool round: between the call and its result.
            await manager.add_message(display_row({"role": "assistant", "content": "running"}))
        await manager.add_message({"role": "tool", "tool_call_id": f"c{t}", "content": BIG})
    await manager.add_message(display_row({"role": "user", "content": "What now? @notes.md"}))
    await manager.add_message(expanded("What now? <file>notes</file>", "What now? @notes.md"))


def assert_sent_without_public_history(
    view: list[dict[str, Any]], manager: SimpleContextManager
) -> None:
    assert public_markers(view) == []
    assert check_view(view, history=manager.messages) == []
    for message in view:
        Message(**message)


async def test_every_view_leaves_the_public_history_out() -> None:
    manager = SimpleContextManager(max_tokens=6_000, token_meter="actual")
    await session_with_public_history(manager)
    stored = copy.deepcopy(manager.messages)

    plain = await manager.get_messages_for_request()
    assert manager.compaction_level > 0, "the session is compacted"
    assert_sent_without_public_history(plain, manager)
    assert plain[-1]["content"] == "What now? <file>notes</file>", "the executed prompt is sent"
    assert all(m.get("content") != "What now? @notes.md" for m in plain)

    retained = await manager.get_messages_for_request_retaining(
        retain_contents=[REMINDER], token_budget=6_000, hard_fit=True
    )
    assert_sent_without_public_history(retained, manager)
    assert sum(m.get("content") == REMINDER for m in retained) == 1, "the sent copy is retained"

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = sum(estimate_message_tokens(m) for m in view)
        measurement = {"kind": "provider_count", "source": "test", "input_tokens": tokens}
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": 10**6,
                "measurement": measurement,
            },
        }

    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[REMINDER], count_view=count_view
    )
    assert_sent_without_public_history(result["base_view"], manager)
    assert await result["transaction"].commit()
    assert manager.messages == stored, "the stored messages keep their public keys"


async def test_what_is_counted_is_what_is_sent() -> None:
    """A display-only row is never sized: one far over the budget changes nothing, and the
    public copy's weight in the metadata is not charged."""
    heavy = "the user's own words " * 6_000  # ~30k tokens, display only
    manager = SimpleContextManager(max_tokens=8_000)
    twin = SimpleContextManager(max_tokens=8_000)
    for m in (
        {"role": "user", "content": "start"},
        display_row({"role": "user", "content": heavy}),
        expanded("go on", heavy),
        {"role": "assistant", "content": "ok"},
    ):
        await manager.add_message(m)
        sent = request_view([m])
        for row in sent:
            await twin.add_message(row)
    view = await manager.get_messages_for_request()
    twin_view = await twin.get_messages_for_request()
    assert manager.compaction_level == 0 and manager.compaction_stats is None
    stats, twin_stats = manager.token_meter_stats, twin.token_meter_stats
    assert stats is not None and twin_stats is not None
    assert stats["estimated"] == twin_stats["estimated"]
    assert stats["estimated"] == sum(estimate_message_tokens(m) for m in view)
    assert [m["content"] for m in view] == [m["content"] for m in twin_view]


async def test_rows_assigned_directly_with_odd_metadata_are_sent_repaired() -> None:
    """A subclass's rows never pass admission: metadata that is no mapping, or has keys that
    are not strings, is repaired for the host and still loses the public history."""
    manager = SimpleContextManager()
    manager.messages = [
        {"role": "user", "content": "a", "metadata": 5},
        {"role": "user", "content": "b", "metadata": "amplifier_public_message"},
        {"role": "assistant", "content": "c", "metadata": {1: "x", "amplifier_public_message": {}}},
        {"role": "user", "content": "d", "metadata": {7: True, REFERENCE_ONLY: True}},
    ]
    view = await manager.get_messages_for_request()
    assert [m.get("metadata") for m in view] == [None, None, {"1": "x"}]
    assert check_view(view, history=manager.messages) == []
    assert manager.messages[2]["metadata"] == {1: "x", "amplifier_public_message": {}}


async def test_a_reminder_kept_only_as_a_display_row_cannot_be_retained() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    row = {"role": "user", "content": REMINDER, "metadata": {"ephemeral": True, "persisted": True}}
    await manager.add_message(display_row(row))
    with pytest.raises(ValueError, match="never admitted"):
        await manager.get_messages_for_request_retaining(retain_contents=[REMINDER])


async def test_display_rows_do_not_widen_the_protected_window() -> None:
    """``protected_recent`` is a share of what is sent: display rows, many of them up front
    (a transcript shown for reference), neither widen nor narrow it."""
    # One protected result: the recent window, not the results' turn, decides what stays.
    manager = SimpleContextManager(max_tokens=9_000, protected_tool_results=1)
    twin = SimpleContextManager(max_tokens=9_000, protected_tool_results=1)
    shown = [display_row({"role": "user", "content": f"earlier note {n}"}) for n in range(40)]
    for m in [*shown, {"role": "user", "content": "Refactor the parser."}]:
        await manager.add_message(m)
    await twin.add_message({"role": "user", "content": "Refactor the parser."})
    for t in range(16):
        call = {"id": f"c{t}", "tool": "bash", "arguments": {}}
        for context in (manager, twin):
            await context.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
            await context.add_message({"role": "tool", "tool_call_id": f"c{t}", "content": BIG})
        view = await manager.get_messages_for_request()
        twin_view = await twin.get_messages_for_request()
        assert _normalised(view) == _normalised(twin_view), f"round {t}"
    assert manager.compaction_level > 0


def test_the_sent_forms_of_a_history_leave_its_display_rows_out() -> None:
    history = [
        {"role": "user", "content": "fix @a.py"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "tool": "x"}]},
        display_row({"role": "user", "content": "shown while the tool ran"}),
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        display_row({"role": "user", "content": "fix @b.py"}),
    ]
    sent = sent_forms(history)
    assert [m.get("content") for m in sent] == ["fix @a.py", "", "ok"]
    assert check_view(sent, history=history) == []
    checker = ViewChecker()
    assert checker.check(sent, history) == []


def test_check_view_reports_a_view_that_carries_the_public_history() -> None:
    prompt = {"role": "user", "content": "hi"}
    assert check_view([prompt]) == []
    assert check_view([display_row(prompt)]) != []
    assert check_view([expanded("hi <file/>", "hi @f")]) != []
    assert check_view(request_view([expanded("hi <file/>", "hi @f")])) == []


# --- generated sessions: the public history changes nothing that is sent ----------------------


def _normalised(view: Sequence[Mapping[str, Any]]) -> list[Any]:
    """What the provider reads, less what depends on history positions: the notice's figures,
    and the ids the view derives for reused call ids (named here by first appearance)."""
    names: dict[str, str] = {}

    def canonical(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                k: names.setdefault(v, f"id{len(names)}")
                if k in ("id", "tool_call_id", "tool_use_id") and isinstance(v, str)
                else canonical(v)
                for k, v in value.items()
                if k != "timestamp"
            }
        if isinstance(value, list):
            return [canonical(v) for v in value]
        return value

    out: list[Any] = []
    for m in view:
        meta = m.get("metadata")
        if isinstance(meta, Mapping) and meta.get("source") == "context-compaction":
            out.append("<notice>")
        else:
            out.append(canonical(m))
    return out


@st.composite
def with_public_history(draw: st.DrawFn) -> tuple[Session, list[dict[str, Any]]]:
    """A generated session with display-only copies inserted anywhere (inside tool rounds too)
    and public copies on some prompts."""
    session = draw(sessions())
    messages: list[dict[str, Any]] = []
    for message in session.messages:
        if message.get("role") == "user" and draw(st.integers(0, 2)) == 0:
            public = {"amplifier_public_copy_source": "test", "amplifier_public_message": message}
            message = {**message, "metadata": public}
        messages.append(message)
        if draw(st.integers(0, 3)) == 0:
            source = draw(st.sampled_from(session.messages))
            messages.append(display_row(source))
    return session, messages


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(with_public_history())
async def test_display_rows_and_public_copies_change_nothing_that_is_sent(
    case: tuple[Session, list[dict[str, Any]]],
) -> None:
    session, messages = case
    manager = SimpleContextManager(max_tool_result_bytes=1 << 20)
    twin = SimpleContextManager(max_tool_result_bytes=1 << 20)
    for manager_ in (manager, twin):
        if session.factory is not None:
            text = session.factory
            await manager_.set_system_prompt_factory(lambda text=text: text)
    budget = session.token_budget
    for message in messages:
        await manager.add_message(message)
        sent = request_view([message])
        for row in sent:
            await twin.add_message(row)
        # Both are asked at the same moments: a request that finds the view still over the
        # trigger plans again, whether or not anything new arrived.
        view = await manager.get_messages_for_request(budget)
        twin_view = await twin.get_messages_for_request(budget)
        assert public_markers(view) == []
        assert check_view(view, history=manager.messages, json_cap=1 << 20) == []
        assert _normalised(view) == _normalised(twin_view)
    assert manager.compaction_level == twin.compaction_level
    # The same escalations, with the same figures: a display-only row is never a unit the
    # ladder takes out, nor a message a notice counts (only the history size includes it).
    positional = ("history_messages", "removed_positions", "truncated_positions",
                  "stubbed_positions")  # fmt: skip
    stats, twin_stats = manager.compaction_stats, twin.compaction_stats
    assert (stats is None) == (twin_stats is None)
    if stats is not None and twin_stats is not None:
        for key in positional:
            del stats[key], twin_stats[key]
        assert stats == twin_stats
    event(f"compaction level {manager.compaction_level}")
    event(f"{sum(REFERENCE_ONLY in (m.get('metadata') or {}) for m in messages)} display rows")
