"""A resume admits its history in one pass (``admit_all``): the same as ``admit`` one by one.

``set_messages`` stores plain messages (nothing to refuse, nothing to clip) without the
general checks; everything else goes through ``admit``. Either way the stored messages, their
timestamps (the clock asked once per message without one, in order), the clip payloads and
any refusal are those of ``admit`` run over the list.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from amplifier_core import HookRegistry, HookResult
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.history._admission import admit, admit_all
from tests.history.test_plain import near_plain
from tests.test_adversarial import hostile_sessions

CAPS = st.sampled_from([205, 1_000, 131_072])


class Ticking:
    """A clock that moves on a millisecond per reading: timestamps show each call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=self.calls)


def one_by_one(messages: list[Any], cap: int) -> tuple[Any, ...]:
    clock = Ticking()
    try:
        admitted = [admit(m, i, cap, clock=clock) for i, m in enumerate(messages)]
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc), clock.calls
    return [s for s, _ in admitted], [c for _, cs in admitted for c in cs], clock.calls


def at_once(messages: list[Any], cap: int) -> tuple[Any, ...]:
    clock = Ticking()
    try:
        stored, clips = admit_all(messages, cap, clock=clock)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc), clock.calls
    return stored, clips, clock.calls


@st.composite
def results_near_the_cap(draw: st.DrawFn) -> dict[str, Any]:
    """A tool result whose string is about a quarter of a cap: the one-pass bound's edge."""
    size = draw(st.sampled_from([51, 52, 249, 250, 251, 32_768, 32_769, 131_073]))
    char = draw(st.sampled_from(["a", "é", "漢", "🙂", "\ud800"]))
    return {
        "role": draw(st.sampled_from(["tool", "function"])),
        "tool_call_id": "call_1",
        "name": "bash",
        "content": char * size,
    }


MESSAGES = st.lists(st.one_of(near_plain(), results_near_the_cap()), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MESSAGES, CAPS)
def test_admitting_at_once_is_admitting_one_by_one(messages: list[Any], cap: int) -> None:
    assert at_once(messages, cap) == one_by_one(messages, cap)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_sessions(), CAPS)
def test_hostile_lists_are_admitted_or_refused_alike(messages: list[Any], cap: int) -> None:
    assert at_once(messages, cap) == one_by_one(messages, cap)


async def test_a_resume_stores_fresh_copies_and_emits_each_clip_in_order() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go", "metadata": {"timestamp": "2026-01-01T00:00:00.000Z"}},
        {"role": "tool", "tool_call_id": "a", "content": "x" * 600},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "b", "content": "y" * 700},
    ]
    hooks = HookRegistry()
    clips: list[dict[str, Any]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        clips.append(data)
        return HookResult(action="continue")

    hooks.register("context:tool_result_ingress_truncated", record, name="capture-clips")
    manager = SimpleContextManager(hooks=hooks, max_tool_result_bytes=300)
    await manager.set_messages(history)
    assert [m is h for m, h in zip(manager.messages, history, strict=True)] == [False] * 4
    assert manager.messages[0]["metadata"] is not history[0]["metadata"]
    assert "metadata" not in history[2], "the caller's dicts are never changed"
    assert [c["tool_call_id"] for c in clips] == ["a", "b"]
    assert [c["original_text_utf8_bytes"] for c in clips] == [600, 700]


async def test_set_messages_stamps_with_the_manager_s_clock_and_refuses_a_non_list() -> None:
    manager = SimpleContextManager(clock=lambda: datetime(2026, 1, 2, 3, 4, 5, 678_000, UTC))
    await manager.set_messages(
        [{"role": "user", "content": "hi"}, {"role": "user", "content": "[x]" * 5}]
    )
    assert [m["metadata"]["timestamp"] for m in manager.messages] == [
        "2026-01-02T03:04:05.678Z"
    ] * 2
    with pytest.raises(TypeError, match=r"^set_messages expects a list of messages, got str$"):
        await manager.set_messages("hi")  # type: ignore[arg-type]
    assert len(manager.messages) == 2, "nothing admitted is lost"


async def test_a_resumed_answer_whose_content_is_a_number_is_refused_by_name() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "kept"})
    with pytest.raises(ValueError) as error:
        await manager.set_messages(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": 5}]
        )
    assert str(error.value) == (
        "message #1 (role='assistant'): 'content' must be a string, a list of blocks or None, "
        "got int"
    )
    assert [m["content"] for m in manager.messages] == ["kept"], "nothing admitted is lost"


async def test_a_resumed_prompt_carrying_a_large_result_block_is_clipped() -> None:
    manager = SimpleContextManager(max_tool_result_bytes=1_000)
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "x" * 50_000}
    await manager.set_messages([{"role": "user", "content": [block]}])
    [stored] = manager.messages[0]["content"]
    assert len(stored["content"].encode()) == 1_000
    assert "truncated at ingress" in stored["content"]


def test_timestamps_are_utc_whatever_the_machine_s_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from amplifier_module_context_simple.history._admission import utc_timestamp

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        moment = datetime(2026, 7, 1, 12, 30, 45, 123_456, tzinfo=UTC)
        assert utc_timestamp(moment) == "2026-07-01T12:30:45.123Z"
        east = moment.astimezone(timezone(timedelta(hours=9)))
        assert utc_timestamp(east) == "2026-07-01T12:30:45.123Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
