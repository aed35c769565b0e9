"""The per-view checks and tallies given the shared head by their caller agree with their own count.

A replay counts once how many leading messages a view re-sends of the previous one and hands
that count (``shared``) to the checker, the host check, the tally and the drop tracker. Each
must then give exactly what it gives when it counts for itself, on the views a real manager
produces: sticky ones, compacted ones and ones ending in the compaction notice.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.checks._invariants import ViewChecker, shared_start
from amplifier_module_context_simple.replay.engine.host_check import HostModelCheck
from amplifier_module_context_simple.replay.engine.view_tally import ViewTally
from amplifier_module_context_simple.replay.findings.drops import DropTracker
from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.vocabulary._messages import (
    REPAIRED_KEY,
    STUBBED_KEY,
    TRUNCATED_KEY,
)

Step = tuple[list[dict[str, Any]], list[dict[str, Any]], int]
"""A view, the history it was built from, and how many messages it shares with the last."""


async def _steps(messages: int, max_tokens: int) -> list[Step]:
    manager = SimpleContextManager(max_tokens=max_tokens)
    steps: list[Step] = []
    previous: list[dict[str, Any]] = []
    for message in generate_session(messages, seed=11):
        if message.get("role") == "assistant":
            view = await manager.get_messages_for_request()
            steps.append((view, list(manager.messages), shared_start(previous, view)))
            previous = view
        await manager.add_message(dict(message))
    return steps


@pytest.fixture(scope="module")
def steps() -> list[Step]:
    found = asyncio.run(_steps(400, 6_000))
    counts = [shared for view, _, shared in found]
    assert 0 in counts[1:], "some view after the first is compacted (shares nothing)"
    assert any(0 < s < len(v) for v, _, s in found), "some view adds to a shared head"
    return found


def test_the_checker(steps: list[Step]) -> None:
    counting, told = ViewChecker(), ViewChecker()
    for view, history, shared in steps:
        assert told.check(view, history, shared=shared) == counting.check(view, history)


def test_the_host_check(steps: list[Step]) -> None:
    # Every view the manager sends passes the host's model, so some get a message it refuses
    # added at the end: a verdict carried over for the wrong message would then show.
    counting, told = HostModelCheck(), HostModelCheck()
    previous: list[dict[str, Any]] = []
    refused = 0
    for number, (view, _, _) in enumerate(steps):
        sent = [*view, {"role": "nobody", "content": "?"}] if number % 3 == 0 else view
        mine = told.check(sent, shared=shared_start(previous, sent))
        assert mine == counting.check(sent)
        refused += bool(mine)
        previous = sent
    assert refused, "some views are refused, so the comparison is not vacuous"


def test_the_tally(steps: list[Step]) -> None:
    counting, told = ViewTally(None, {}), ViewTally(None, {})
    for view, _, shared in steps:
        assert told.sums(view, shared=shared) == counting.sums(view)


def test_the_tally_adds_up_every_view_whole(steps: list[Step]) -> None:
    # Its running totals against the sums over each whole view.
    tally = ViewTally(None, {})
    shortened = 0
    for view, _, shared in steps:
        sums = tally.sums(view, shared=shared)
        assert sums.tokens == sum(estimate_message_tokens(m) for m in view)
        assert sums.shortened == sum(bool(m.get(TRUNCATED_KEY)) for m in view)
        assert sums.repaired == sum(bool(m.get(REPAIRED_KEY)) for m in view)
        assert sums.stubs == sum(bool(m.get(STUBBED_KEY)) for m in view)
        shortened += sums.shortened
    assert shortened, "some views shorten results, so the counts are not vacuous"


def test_the_drop_tracker(steps: list[Step]) -> None:
    counting, told = DropTracker(None), DropTracker(None)
    found = 0
    for request, (view, history, shared) in enumerate(steps, 1):
        mine = told.observe(request, view, history, level=0, compacted=False, shared=shared)
        assert mine == counting.observe(request, view, history, level=0, compacted=False)
        found += len(mine)
    assert found, "the views leave messages out, so the comparison is not vacuous"
