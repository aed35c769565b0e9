"""Cache reuse as the provider saw it (replay/provider/cache_rules.py, cache_reuse.py) and its table
(replay/output/window_tables.py)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.replay.output.window_tables import render_cache
from amplifier_module_context_simple.replay.provider.cache_reuse import (
    CacheTracker,
    cache_report,
)
from amplifier_module_context_simple.replay.provider.cache_rules import (
    COMPACTION,
    EDIT,
    INJECTION_MOVED,
    SYSTEM_CHANGED,
    TOOLS_CHANGED,
    digest,
    first_difference,
)

from .session_payloads import SESSION_DIR, recorded, transcript
from .test_payload import OUTPUT, PROMPT, REMINDER, TRANSCRIPT, anthropic, call, result, user

NOTICE = user('<system-reminder source="context-compaction">\nEarlier conversation was compacted'
              "\n</system-reminder>")  # fmt: skip
EPHEMERAL = {"type": "ephemeral"}


def marked(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with cache_control on its last block, as providers place it."""
    payload = copy.deepcopy(payload)
    last = payload["messages"][-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = EPHEMERAL
    return payload


def test_a_moved_cache_control_marker_is_no_difference() -> None:
    before = marked(anthropic(user(PROMPT), call()))
    after = marked(anthropic(user(PROMPT), call(), result(OUTPUT)))
    assert "cache_control" in before["messages"][1]["content"][0]
    assert "cache_control" not in after["messages"][1]["content"][0]
    assert first_difference(before, after) is None


def test_the_appended_tail_that_is_gone_is_a_moved_injection_at_its_result() -> None:
    before = anthropic(user(PROMPT), call(), result(OUTPUT + "\n\n" + REMINDER))
    after = anthropic(user(PROMPT), call(), result(OUTPUT), call(), result(OUTPUT + REMINDER))
    d = first_difference(digest(before, TRANSCRIPT), digest(after, TRANSCRIPT))
    assert d is not None
    assert (d.part, d.index, d.block_index, d.position, d.cause) == (
        "messages", 2, 0, 2, INJECTION_MOVED,
    )  # fmt: skip
    # Without a transcript the tag alone finds the injection.
    assert first_difference(before, after) == d.__class__("messages", 2, 0, None, INJECTION_MOVED)


def test_a_whole_injected_message_that_is_gone_is_a_moved_injection() -> None:
    before = anthropic(user(PROMPT), user(REMINDER))
    after = anthropic(user(PROMPT), call(), result(OUTPUT))
    d = first_difference(digest(before, TRANSCRIPT), digest(after, TRANSCRIPT))
    assert d is not None
    assert (d.index, d.block_index, d.cause) == (1, 0, INJECTION_MOVED)


def test_a_changed_message_is_an_edit() -> None:
    before = anthropic(user(PROMPT), call(), result(OUTPUT))
    after = anthropic(user(PROMPT + " Quickly."), call(), result(OUTPUT))
    d = first_difference(digest(before, TRANSCRIPT), digest(after, TRANSCRIPT))
    assert d is not None
    assert (d.part, d.index, d.block_index, d.position, d.cause) == ("messages", 0, 0, 0, EDIT)


def test_a_removed_message_is_a_compaction_when_the_new_request_says_so() -> None:
    before = anthropic(user(PROMPT), call(), result(OUTPUT))
    shorter = anthropic(user(PROMPT))
    with_notice = anthropic(user(PROMPT), NOTICE)
    truncated = anthropic(user(PROMPT), call(), result("[truncated: ~900 tokens - call tool "
                                                       "again if needed] State..."))  # fmt: skip
    assert first_difference(before, shorter, compacted=True).cause == COMPACTION  # type: ignore[union-attr]
    assert first_difference(before, shorter).cause == EDIT  # type: ignore[union-attr]
    d = first_difference(digest(before, TRANSCRIPT), digest(with_notice, TRANSCRIPT))
    assert d is not None and (d.index, d.cause) == (1, COMPACTION)
    d = first_difference(before, truncated)
    assert d is not None and (d.index, d.block_index, d.cause) == (2, 0, COMPACTION)


def test_system_and_tools_changes_come_before_the_messages() -> None:
    before = anthropic(user(PROMPT))
    system = anthropic(user("other"), system="A new system prompt.")
    d = first_difference(before, system)
    assert d is not None and (d.part, d.index, d.cause) == ("system", 0, SYSTEM_CHANGED)
    tools = copy.deepcopy(system)
    tools["tools"].append({"name": "read_file", "input_schema": {}})
    d = first_difference(before, tools)
    assert d is not None and (d.part, d.index, d.cause) == ("tools", 1, TOOLS_CHANGED)


@given(
    st.lists(st.sampled_from(["prompt", "call", "reminder"]), max_size=5),
    st.lists(st.text(max_size=50), min_size=1, max_size=4),
)
def test_appending_messages_never_yields_a_difference(kinds: list[str], extra: list[str]) -> None:
    messages: list[dict[str, Any]] = [user(PROMPT)]
    for kind in kinds:
        messages += {"prompt": [user("next")], "call": [call(), result(OUTPUT)],
                     "reminder": [user(REMINDER)]}[kind]  # fmt: skip
    before = marked(anthropic(*messages))
    after = marked(anthropic(*messages, *(user(text) for text in extra)))
    assert first_difference(before, after) is None
    assert first_difference(digest(before, TRANSCRIPT), digest(after, TRANSCRIPT)) is None


def test_the_tracker_headline_counts_reads_over_occupancy_and_breaks_by_cause() -> None:
    tracker = CacheTracker(TRANSCRIPT, family="claude47")
    first = anthropic(user(PROMPT), user(REMINDER))
    second = anthropic(user(PROMPT), call(), result(OUTPUT + REMINDER))
    third = anthropic(user(PROMPT), call(), result(OUTPUT + REMINDER), user("more"))
    tracker.add(1, first, {"input_tokens": 2, "cache_write_tokens": 1_000})
    tracker.add(2, second, {"input_tokens": 900, "cache_read_tokens": 800,
                            "cache_write_tokens": 200})  # fmt: skip
    r3 = tracker.add(3, third, {"input_tokens": 1_150, "cache_read_tokens": 1_100})
    report = tracker.report()
    assert [r.is_break for r in report.requests] == [False, True, False]
    assert report.breaks == 1
    assert report.causes() == {INJECTION_MOVED: 1}
    assert report.occupancy == 1_002 + 1_100 + 1_150
    assert report.share == pytest.approx((800 + 1_100) / 3_252)
    assert report.requests[0].read_reach is None  # nothing read
    assert r3.occupancy == 1_150


def _uncut(text: str, cells: list[str]) -> None:
    for cell in cells:
        assert re.search(rf"(?<![\d,]){re.escape(cell)}(?![\d,])", text), cell


needs_session = pytest.mark.skipif(
    not SESSION_DIR.is_dir(), reason="the shared recorded session is absent"
)


@needs_session
def test_the_recorded_session_breaks_the_cache_on_every_request_at_the_moving_reminder() -> None:
    payloads, usages = recorded(SESSION_DIR)
    report = cache_report(zip(payloads, usages, strict=True), transcript(SESSION_DIR),
                          family="claude47")  # fmt: skip
    first, *later = report.requests
    assert (first.cache_write, first.cache_read, first.difference) == (74_178, None, None)
    assert [r.cache_read for r in later] == [67_190] * 8
    # No message token was served from the cache: each read covered tools and system only.
    assert [r.read_reach for r in later] == [0] * 8
    assert report.breaks == 8
    assert report.causes() == {INJECTION_MOVED: 8}
    # Request 2 loses request 1's injected message; each later one the tail of the last result.
    assert [(r.difference.index, r.difference.block_index) for r in later if r.difference] == [
        (1, 0), (2, 0), (4, 0), (6, 0), (8, 0), (10, 0), (12, 0), (14, 0),
    ]  # fmt: skip
    assert report.share == pytest.approx(537_520 / 689_467)
    console = Console(width=80, record=True)
    render_cache(console, report)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    _uncut(text, ["67,190", "74,178", "12,120", "537,520", "689,467"])
    assert "8 cache break(s): 8 tail injection moved" in " ".join(text.split())
    assert "No message token was served from the cache" in text
    assert "…" not in text


# --- what the recorded requests cost ------------------------------------------------------------


def test_each_recorded_request_is_priced_and_the_breaks_cost_is_what_shared_was_not_read() -> None:
    tracker = CacheTracker(TRANSCRIPT)
    first = anthropic(user(PROMPT), call())
    extended = anthropic(user(PROMPT), call(), result(OUTPUT))
    edited = anthropic(user(PROMPT + " (edited)"), call(), result(OUTPUT))
    usages = [
        {"input_tokens": 1_000, "cache_read_tokens": 0, "cache_write_tokens": 4_000},
        {"input_tokens": 4_200, "cache_read_tokens": 4_000, "cache_write_tokens": 600},
        {"input_tokens": 200, "cache_read_tokens": 0, "cache_write_tokens": 4_600},
    ]
    for number, (payload, usage) in enumerate(zip((first, extended, edited), usages, strict=True)):
        tracker.add(number + 1, payload, usage, model="claude-opus-4-8")
    report = tracker.report()
    one, two, three = report.requests
    # Opus 4.8: writes 1.25x, reads 0.1x the $5/MTok base.
    assert one.priced_input_tokens == 1_000 + 4_000 * 1.25
    assert two.priced_input_tokens == 200 + 600 * 1.25 + 4_000 * 0.1
    assert report.priced_input_tokens == sum(r.priced_input_tokens or 0 for r in report.requests)
    assert report.input_dollars == pytest.approx(report.priced_input_tokens * 5 / 1_000_000)
    # Request 2 extends request 1: it shares all of it; the edit at the first message leaves
    # request 3 only the system part (the head) in common.
    assert 0 < three.shared_tokens < two.shared_tokens
    breaks = report.break_cost()
    assert breaks is not None
    assert 0 < breaks.caused_tokens < breaks.actual_tokens
    unknown = CacheTracker(TRANSCRIPT)
    unknown.add(1, first, usages[0], model="some-local-model")
    assert unknown.report().input_dollars is None
    assert unknown.report().priced_input_tokens == 1_000 + 4_000 * 1.25


def test_a_break_that_rewrote_a_shared_prefix_is_what_the_breaks_cost() -> None:
    tracker = CacheTracker(TRANSCRIPT)
    before = anthropic(user(PROMPT), call(), result(OUTPUT + "\n\n" + REMINDER))
    after = anthropic(user(PROMPT), call(), result(OUTPUT), call(), result(OUTPUT))
    tracker.add(1, before, {"input_tokens": 100, "cache_write_tokens": 3_000}, model="gpt-5")
    # The provider wrote everything again although the head was shared.
    tracker.add(2, after, {"input_tokens": 100, "cache_write_tokens": 5_000}, model="gpt-5")
    report = tracker.report()
    second = report.requests[1]
    assert second.is_break and second.shared_tokens > 0
    breaks = report.break_cost()
    assert breaks is not None and breaks.caused_tokens >= 0
    # GPT-5 writes at the base price and reads at 0.1x: what was shared and rewritten costs
    # 0.9 of a token per token, minus nothing.
    assert breaks.caused_tokens == pytest.approx(0.9 * min(second.shared_tokens, 5_100))


# --- the tracker against the whole-payload rule -------------------------------------------------

# Messages a session's requests are made of: the transcript's, a reminder appended or on its
# own, the compaction notice, a truncated result, an edited prompt, a system-role message.
POOL = [
    user(PROMPT), call(), result(OUTPUT), result(OUTPUT + "\n\n" + REMINDER), user(REMINDER),
    NOTICE, result("[truncated: 1,200 tokens]"), user(PROMPT + " (edited)"), user("more"),
    {"role": "system", "content": "Keep notes."},
]  # fmt: skip


@st.composite
def request_sequences(draw: st.DrawFn) -> list[tuple[dict[str, Any], dict[str, int], bool]]:
    """Requests that mostly extend the one before (fresh copies, as a recording is read back),
    sometimes cut, edited, re-marked with cache_control, or sent with other tools or system."""
    messages: list[int] = []
    out: list[tuple[dict[str, Any], dict[str, int], bool]] = []
    for _ in range(draw(st.integers(1, 7))):
        step = draw(st.sampled_from(["extend", "extend", "cut", "edit", "same"]))
        if step == "extend" or not messages:
            messages += draw(st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=3))
        elif step == "cut":
            del messages[draw(st.integers(0, len(messages) - 1)) :]
        elif step == "edit":
            messages[draw(st.integers(0, len(messages) - 1))] = draw(st.integers(0, len(POOL) - 1))
        system = "Be brief." if draw(st.integers(0, 5)) == 0 else "You are careful."
        payload = anthropic(*copy.deepcopy([POOL[m] for m in messages]), system=system)
        if draw(st.booleans()) and payload["messages"]:
            payload = marked(payload)
        if draw(st.integers(0, 5)) == 0:
            payload["tools"] = [{**payload["tools"][0], "description": "Run it."}]
        usage = {"input_tokens": draw(st.integers(0, 3_000)),
                 "cache_read_tokens": draw(st.integers(0, 3_000))}  # fmt: skip
        out.append((payload, usage, draw(st.integers(0, 5)) == 0))
    return out


def whole_payload_figures(
    requests: list[tuple[dict[str, Any], dict[str, int], bool]],
    history: list[dict[str, Any]] | None,
) -> list[tuple[Any, int, int | None]]:
    """(difference, shared tokens, read reach) per request, each payload digested whole."""
    figures: list[tuple[Any, int, int | None]] = []
    previous = None
    for payload, usage, compacted in requests:
        current = digest(payload, history, family="claude47")
        prefix = current.prefix_tokens
        reach = min(range(len(prefix)), key=lambda k: abs(prefix[k] - usage["cache_read_tokens"]))
        if previous is None:
            figures.append((None, 0, reach if usage["cache_read_tokens"] else None))
        else:
            difference = first_difference(previous, current, compacted=compacted)
            old = previous.prefix_tokens
            shared = (old[-1] if difference is None
                      else 0 if difference.part != "messages"
                      else old[min(difference.index, len(old) - 1)])  # fmt: skip
            figures.append((difference, shared, reach if usage["cache_read_tokens"] else None))
        previous = current
    return figures


@given(request_sequences(), st.booleans())
def test_the_tracker_finds_what_digesting_each_whole_payload_finds(
    requests: list[tuple[dict[str, Any], dict[str, int], bool]], with_transcript: bool
) -> None:
    history = TRANSCRIPT if with_transcript else None
    tracker = CacheTracker(history, family="claude47")
    found = [
        tracker.add(n, payload, usage, compacted=compacted)
        for n, (payload, usage, compacted) in enumerate(requests, 1)
    ]
    expected = whole_payload_figures(requests, history)
    assert [(r.difference, r.shared_tokens, r.read_reach) for r in found] == expected
    last = digest(requests[-1][0], history, family="claude47")
    assert tracker.last_compacted == any(m.marked for m in last.messages)


@given(
    st.lists(st.integers(1, 400), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 12), st.lists(st.integers(0, 11), max_size=4),
                       st.integers(0, 2_000)),
             min_size=1, max_size=8),
)  # fmt: skip
def test_a_logs_requests_are_followed_by_the_very_messages_they_resend(
    sizes: list[int], steps: list[tuple[int, list[int], int]]
) -> None:
    # A Claude Code log's requests re-send the messages of one list (after a compaction: from
    # its summary on). Where a request stops re-sending the previous one's messages, the cause
    # is compaction when its first message is new, else an edit.
    wire = [user(f"message {n}: " + "word " * size) for n, size in enumerate(sizes)]
    tracker = CacheTracker(family="claude47")
    previous: list[dict[str, Any]] | None = None
    for number, (cut, added, read) in enumerate(steps, 1):
        sent = (previous or [])[:cut] + [wire[n % len(wire)] for n in added] or wire[:1]
        usage = {"input_tokens": 5_000, "cache_read_tokens": read}
        found = tracker.add(number, {"messages": sent}, usage, messages_only=True)
        tokens = [estimate_message_tokens(m, family="claude47") for m in sent]
        boundaries = [sum(tokens[:k]) for k in range(len(sent) + 1)]
        reach = min(range(len(boundaries)), key=lambda k: abs(boundaries[k] - read))
        assert found.read_reach == (reach if read else None)
        assert tracker.sent_tokens == boundaries[-1]
        if previous is None:
            assert (found.difference, found.shared_tokens) == (None, 0)
        else:
            pairs = enumerate(zip(previous, sent, strict=False))
            same = next((k for k, (a, b) in pairs if a is not b), min(len(previous), len(sent)))
            kept = sum(estimate_message_tokens(m, family="claude47") for m in previous[:same])
            assert found.shared_tokens == kept
            if same == len(previous):
                assert found.difference is None
            else:
                assert found.difference is not None
                assert found.difference.where() == f"message {same}"
                assert found.difference.cause == (COMPACTION if same == 0 else EDIT)
        previous = sent
