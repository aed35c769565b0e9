"""One transcript index for a whole session (``payload_match.TranscriptIndex``): aligning every
recorded request with an index that grows with the history gives what indexing the history
afresh for each request gave.

The session is the example generator's (tool rounds with parallel calls, thinking, hook
reminders), with one recorded payload before every assistant message, in the shapes a replay
meets: OpenAI chat and Anthropic blocks, a reminder as a message of its own or appended to the
newest block, the session's own compaction (the payload starts later, behind a notice), a tool
result whose id the view renamed, a user message stubbed, a user text redacted. The last test
holds the replay's analysis to a new index when the history starts afresh (``follow``).
"""

from __future__ import annotations

from typing import Any

from amplifier_module_context_simple.replay.engine.session_analysis import WindowAnalysis
from amplifier_module_context_simple.replay.payloads.payload_match import (
    Alignment,
    TranscriptIndex,
    align,
)
from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.replay.recordings.session_dir import RecordedRequest

REMINDER = (
    '\n<system-reminder source="hooks-status-context">\nWorking directory: /w\n</system-reminder>'
)
NOTICE = {
    "role": "user",
    "content": '<system-reminder source="context-compaction">\nEarlier turns were compacted.\n'
    "</system-reminder>",
}
STUB = '[User message compacted - original: "{head}..."]'
CUT_EVERY = 40
"""Every this many requests the session compacts: its payloads keep the first prompt, then
the notice, then start again at a user message at least 12 messages back (often more than
``USER_LOOKAHEAD`` user messages ahead of the prompt: found through the index of texts)."""


def _anthropic(message: dict[str, Any]) -> dict[str, Any]:
    """One transcript message as the Anthropic provider sends it."""
    if message["role"] == "tool":
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                 "content": message["content"]}  # fmt: skip
        return {"role": "user", "content": [block]}
    content = message["content"]
    if message["role"] == "assistant" and isinstance(content, list):
        blocks = [{**b, "type": "tool_use"} if b.get("type") == "tool_call" else b for b in content]
        return {"role": "assistant", "content": blocks}
    return {"role": message["role"], "content": content}


def _varied(message: dict[str, Any], number: int, ordinal: int) -> dict[str, Any]:
    """Now and then what a view sends instead of the message: a renamed result id, a stub, a
    redaction."""
    content = message.get("content")
    if message["role"] == "tool" and (number + ordinal) % 7 == 0:
        return {**message, "tool_call_id": f"renamed_{ordinal}"}
    if message["role"] == "user" and isinstance(content, str) and len(content) > 30:
        if (number + ordinal) % 5 == 0:
            return {**message, "content": STUB.format(head=content[:20])}
        if (number + ordinal) % 5 == 1:
            return {**message, "content": content[:10] + "[REDACTED:PII]" + content[24:]}
    return message


def _payload(history: list[dict[str, Any]], number: int, start: int) -> dict[str, Any]:
    """Request ``number``'s payload: ``history`` from ``start``, varied, in one of two shapes,
    with a reminder; once the session has compacted (``start`` > 0), the first prompt and the
    notice come first."""
    kept = [history[0], NOTICE] if start else []
    sent = kept + [_varied(m, number, k) for k, m in enumerate(history[start:], start)]
    if number % 2:
        messages = [_anthropic(m) for m in sent]
        last = messages[-1]["content"]
        if isinstance(last, list) and isinstance(last[-1].get("content"), str):
            last[-1] = {**last[-1], "content": last[-1]["content"] + REMINDER}
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": REMINDER}]})
        return {"system": "You are careful.", "messages": messages}
    messages = [{"role": "system", "content": "You are careful."}, *sent]
    messages.append({"role": "user", "content": REMINDER.strip()})
    return {"messages": messages}


def _requests(transcript: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(history length, payload) for every request: one before each assistant message."""
    requests: list[tuple[int, dict[str, Any]]] = []
    start = 0
    for position, message in enumerate(transcript):
        if message["role"] != "assistant":
            continue
        number = len(requests) + 1
        if number % CUT_EVERY == 0:
            users = [k for k in range(1, position - 11) if transcript[k]["role"] == "user"]
            start = users[-1] if users else 0
        requests.append((position, _payload(transcript[:position], number, start)))
    return requests


def _both_ways(transcript: list[dict[str, Any]]) -> tuple[list[Alignment], list[Alignment]]:
    """Every request aligned with one index that grows with the history, and with the history
    so far indexed afresh."""
    history: list[dict[str, Any]] = []
    index = TranscriptIndex(history)
    grown: list[Alignment] = []
    fresh: list[Alignment] = []
    for position, payload in _requests(transcript):
        history += transcript[len(history) : position]  # the replay's list, appended in place
        grown.append(align(payload, index, family="claude47"))
        fresh.append(align(payload, list(history), family="claude47"))
    return grown, fresh


def test_one_index_grown_with_the_session_aligns_as_a_fresh_one_per_request() -> None:
    transcript = generate_session(900, seed=11)
    grown, fresh = _both_ways(transcript)
    assert len(grown) > 100
    assert grown == fresh
    # The session exercises what the index serves: ids, user texts, renamed results, stubs,
    # edits, injections of both kinds and the notice.
    rows = [m for a in grown for m in a.messages]
    assert sum(1 for m in rows if m.positions) > 10_000
    assert any(m.edited for m in rows)
    assert any(m.notice for m in rows)
    injections = [i for a in grown for i in a.injections]
    assert any(i.block_index is None for i in injections)
    assert any(i.position is not None for i in injections)


def test_an_index_follows_a_history_that_starts_again() -> None:
    transcript = generate_session(200, seed=5)
    history = list(transcript)
    index = TranscriptIndex(history)
    [(position, payload)] = [r for r in _requests(transcript) if r[0] > 150][:1]
    before = align(payload, list(transcript[:position]), family="claude47")
    # Shortened in place (as no replay does, but a caller may): indexed again from the start.
    del history[position:]
    assert align(payload, index, family="claude47") == before
    history.clear()
    assert align(payload, index, family="claude47") == align(payload, [], family="claude47")


def test_the_next_message_in_a_role_is_the_first_at_or_after_the_start() -> None:
    transcript = generate_session(300, seed=2)
    index = TranscriptIndex(transcript)
    for role in ("user", "assistant", "tool"):
        for start in range(len(transcript) + 1):
            expected = next(
                (p for p in range(start, len(transcript)) if transcript[p]["role"] == role), None
            )
            assert index.next_role(role, start) == expected


def _window(analysis: WindowAnalysis, number: int, payload: dict[str, Any]) -> dict[str, Any]:
    """The window a replay's analysis reports for one recorded request (its number apart)."""
    request = RecordedRequest(number, None, payload, None)
    analysis.observe(number, 200_000, [], request, view_tokens=0)
    return {**analysis.entries[-1].as_json(), "request": None}


def test_a_replay_whose_history_starts_afresh_aligns_with_the_new_history() -> None:
    transcript = generate_session(200, seed=5)
    requests = _requests(transcript)
    (early, early_payload), (late, late_payload) = requests[5], requests[-1]

    def analysis(history: list[dict[str, Any]]) -> WindowAnalysis:
        return WindowAnalysis(
            family="claude47", context_window=200_000, max_output=8_000, overhead=None,
            history=history,
        )  # fmt: skip

    followed = analysis(list(transcript[:early]))
    _window(followed, 1, early_payload)
    followed.follow(list(transcript[:late]))  # a new list, as the manager's clear() makes
    alone = analysis(list(transcript[:late]))
    assert _window(followed, 2, late_payload) == _window(alone, 1, late_payload)
