"""A notice stands through a later escalation that changes nothing before it (issue 35, item 4).

An escalation restates its figures and its map, so it writes a notice of its own. When it
changed nothing up to a notice the previous view showed, that notice stays where it stood,
byte for byte, and the new one goes where the new reductions start: the previous request is
then not broken at its notice (``tests/notice_moves.py`` counts the requests that were:
``gone_at_escalation``). With no room for one more notice, the ones standing stay and the
escalation adds none; at most three stand at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

from ..conftest import Recorder
from ..notice_moves import is_notice, read_transcript, replay
from ..test_provider_views import PROPERTY_SETTINGS
from .test_notice_still import CODING_SESSION, _Draw, coding_session

Msg = dict[str, Any]


def batches(rounds: int = 12, lines: int = 40) -> list[Msg]:
    """Reads in batches of three, each batch closed by an answer and opened by a prompt."""
    messages: list[Msg] = [{"role": "user", "content": "Read the modules."}]
    for i in range(rounds):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "tool": "read_file", "arguments": {"path": f"src/m{i}.py"}}
        ]})  # fmt: skip
        body = f"line of src/m{i}.py helper_{i}\n" * lines
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
        if i % 3 == 2:
            messages.append({"role": "assistant", "content": f"Done with batch {i}."})
            messages.append({"role": "user", "content": f"Now batch {i + 1}."})
    messages.append({"role": "assistant", "content": "All done."})
    return messages


def run(messages: list[Msg], budget: int, **config: Any) -> Any:
    logging.disable(logging.WARNING)
    try:
        return asyncio.run(replay(messages, budget, resume=True, **config))
    finally:
        logging.disable(logging.NOTSET)


def test_an_escalation_after_a_notice_leaves_it_standing() -> None:
    # At 1,500 tokens the escalation before the last answer shortens only what came after
    # the notice in force; the notice stays, and the previous request is whole in the next.
    found = run(batches(), 1_500)
    assert found.escalations >= 10
    assert found.gone_at_escalation == []
    assert found.resumed_differ == []


async def test_standing_notices_keep_their_bytes_and_place() -> None:
    manager = SimpleContextManager()
    previous: list[Msg] = []
    stood = 0
    for message in batches():
        if message["role"] == "assistant":
            view = await manager.get_messages_for_request(token_budget=1_500)
            assert check_view(view, history=manager.messages) == []
            notices = [i for i, m in enumerate(view) if is_notice(m)]
            assert len(notices) <= 3
            for i in (i for i, m in enumerate(previous) if is_notice(m)):
                if i < len(view) and view[: i + 1] == previous[: i + 1]:
                    stood += 1
            previous = view
        await manager.add_message(message)
    assert stood > 0, "some notice stood through a later request"


async def test_no_more_than_three_notices_stand() -> None:
    # Thirty reads of 80 lines at 2,000 tokens would stack four notices without the limit.
    manager = SimpleContextManager()
    most = 0
    for message in batches(rounds=30, lines=80):
        if message["role"] == "assistant":
            view = await manager.get_messages_for_request(token_budget=2_000)
            most = max(most, len([m for m in view if is_notice(m)]))
        await manager.add_message(message)
    assert most == 3


@pytest.mark.skipif(not CODING_SESSION.is_file(), reason="../shared/sessions is not available")
@pytest.mark.parametrize("budget", [2_000, 8_000, 16_000, 30_000])
def test_the_shared_coding_session_loses_no_notice_at_an_escalation(budget: int) -> None:
    # The requests 13, 36, 46, ... at 2,000: each escalation there shortened only
    # what came after the notice the request before ended with. (At 4,000, one request
    # whose floor is over the budget merges its notices: one new notice takes less room
    # than the one that stood, and the budget wins.)
    found = run(read_transcript(CODING_SESSION), budget)
    assert found.gone_at_escalation == []
    assert found.resumed_differ == []


@PROPERTY_SETTINGS
@given(st.data(), st.integers(2_000, 30_000))
def test_every_view_with_standing_notices_is_valid_and_within_the_budget(
    data: st.DataObject, budget: int
) -> None:
    session = coding_session(_Draw(data))

    async def check() -> None:
        manager = SimpleContextManager()
        for message in session:
            if message["role"] == "assistant":
                view = await manager.get_messages_for_request(token_budget=budget)
                assert check_view(view, history=manager.messages) == []
                assert len([m for m in view if is_notice(m)]) <= 3
            await manager.add_message(message)

    logging.disable(logging.WARNING)
    try:
        asyncio.run(check())
    finally:
        logging.disable(logging.NOTSET)


def test_a_resume_counts_the_room_of_the_notices_standing_at_each_point() -> None:
    # Small reads and a large map share: three standing notices take more than the longest
    # notice alone, which moves the hard limit below the trigger at some request points. A
    # resumed walk that kept the limit of its first point would pass over an escalation the
    # running session made there.
    found = run(batches(rounds=60, lines=8), 6_000, compaction_map_share=0.2)
    assert found.escalations > 0
    assert found.resumed_differ == []


async def test_a_standing_notice_is_the_one_an_earlier_view_showed_map_and_all() -> None:
    # Thirty reads of 80 lines at 2,000 tokens: notices stand beside newer ones, each with
    # the map of what its escalation left out.
    manager = SimpleContextManager()
    shown: set[str] = set()
    standing = 0
    for message in batches(rounds=30, lines=80):
        if message["role"] == "assistant":
            view = await manager.get_messages_for_request(token_budget=2_000)
            notices = [str(m["content"]) for m in view if is_notice(m)]
            for text in notices[:-1]:
                assert text in shown, "a standing notice is re-sent as it was first shown"
                assert "src/m" in text, "with the names its map listed"
                standing += 1
            shown.update(notices)
        await manager.add_message(message)
    assert standing > 0


async def _events_against_views(messages: list[Msg], budget: int) -> list[tuple[Msg, list[Msg]]]:
    """Each escalation's ``context:compaction`` payload with the view that went out with it."""
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    found: list[tuple[Msg, list[Msg]]] = []
    for position, message in enumerate(messages):
        if position > 0 and message["role"] == "assistant":
            heard = len(recorder.named("context:compaction"))
            view = await manager.get_messages_for_request(token_budget=budget)
            found += [(event, view) for event in recorder.named("context:compaction")[heard:]]
        await manager.add_message(message)
    return found


@pytest.mark.parametrize(
    ("source", "budget"),
    [("batches", 2_000), ("coding", 3_000), ("coding", 4_000), ("coding", 5_000)],
)
async def test_every_compaction_event_gives_the_figures_of_the_view_that_went_out(
    source: str, budget: int
) -> None:
    # Batches of reads at 2,000 tokens: notices stand, and some escalations add none. The
    # coding session at 3,000 to 5,000: at some requests the standing notices have no room
    # left, and the newest of them merge into the new one.
    if source == "coding" and not CODING_SESSION.is_file():
        pytest.skip("../shared/sessions is not available")
    messages = (
        batches(rounds=30, lines=80) if source == "batches" else read_transcript(CODING_SESSION)
    )
    logging.disable(logging.WARNING)
    try:
        found = await _events_against_views(messages, budget)
    finally:
        logging.disable(logging.NOTSET)
    assert len(found) > 5
    for event, view in found:
        assert event["after_messages"] == len(view)
        assert event["after_tokens"] == sum(map(estimate_message_tokens, view))
    assert any(sum(map(is_notice, view)) > 1 for _, view in found), "notices stood"
