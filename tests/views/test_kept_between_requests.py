"""Caches that keep work from one request (or one view) to the next never go stale.

Each test drives a session through the states a cache is keyed on and compares what the
cached path gives with what a fresh computation gives.
"""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
from typer.testing import CliRunner

from amplifier_module_context_simple import ContextConfig, SimpleContextManager
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.engine.engine import replay
from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.views._render import notice
from amplifier_module_context_simple.vocabulary._messages import LOADED_TOOLS_KEY

BIG = "line of build output that goes on for a while\n" * 120


async def _turn(manager: SimpleContextManager, t: int) -> None:
    await manager.add_message({"role": "user", "content": f"step {t}: fix the build"})
    await manager.add_message(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{t}", "tool": "bash", "arguments": {"cmd": "make"}}],
        }
    )
    await manager.add_message({"role": "tool", "tool_call_id": f"c{t}", "content": BIG})


def _is_notice(message: dict[str, Any]) -> bool:
    return message.get("metadata", {}).get("source") == "context-compaction"


@pytest.mark.parametrize("verbosity", ["minimal", "normal", "verbose"])
async def test_the_notice_is_reused_only_while_it_reads_the_same(verbosity: str) -> None:
    manager = SimpleContextManager(max_tokens=12_000, compaction_notice_verbosity=verbosity)
    await manager.add_message({"role": "user", "content": "Fix the failing build please."})
    state = manager._state  # pyright: ignore[reportPrivateUsage]
    notices: list[dict[str, Any]] = []
    escalations: set[int] = set()
    for t in range(40):
        await _turn(manager, t)
        view = await manager.get_messages_for_request()
        shown = [m for m in view if _is_notice(m)]
        if not shown:
            continue
        assert state.stats is not None
        # What a fresh notice for the decisions in force says, after every request.
        assert shown == [notice(state.stats, state.decisions, verbosity)]
        notices.append(shown[0])
        escalations.add(state.decisions.escalations)
    assert len(escalations) > 1, "the session escalates more than once"
    for earlier, later in itertools.pairwise(notices):
        same = earlier["content"] == later["content"]
        assert (earlier is later) == same, "one dict exactly while the text is the same"


def _positions_from_facts(manager: SimpleContextManager) -> dict[str, list[int]]:
    facts = manager.planner.index.facts
    return {
        "system": [i for i, f in enumerate(facts) if f.role == "system"],
        "human": [i for i, f in enumerate(facts) if f.human],
        "tool_result": [i for i, f in enumerate(facts) if f.tool_result],
        "loaded_tools": [i for i, f in enumerate(facts) if f.loaded_tools],
    }


def _positions_kept(manager: SimpleContextManager) -> dict[str, list[int]]:
    index = manager.planner.index
    return {
        "system": list(index.system_positions),
        "human": list(index.human_positions),
        "tool_result": list(index.tool_result_positions),
        "loaded_tools": list(index.loaded_tool_positions),
    }


async def test_the_index_position_lists_follow_the_history() -> None:
    manager = SimpleContextManager(max_tokens=12_000)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Fix the failing build please."},
        {"role": "user", "content": "tools", "metadata": {LOADED_TOOLS_KEY: ["bash"]}},
    ]
    for m in messages:
        await manager.add_message(m)
    for t in range(12):
        await _turn(manager, t)
        await manager.get_messages_for_request()
        assert _positions_kept(manager) == _positions_from_facts(manager)
    # A subclass re-reading its history hands equal copies: the lists stay as they are.
    manager.messages = [dict(m) for m in manager.messages]
    await manager.get_messages_for_request()
    assert _positions_kept(manager) == _positions_from_facts(manager)
    # A rewrite (the history changed in place) makes the index start over.
    manager.messages = [manager.messages[0], *manager.messages[2:]]
    await manager.get_messages_for_request()
    assert _positions_kept(manager) == _positions_from_facts(manager)
    assert _positions_kept(manager)["loaded_tools"] == [1]
    await manager.set_messages(messages)
    await manager.get_messages_for_request()
    assert _positions_kept(manager) == _positions_from_facts(manager)
    await manager.clear()
    await manager.add_message({"role": "user", "content": "again"})
    await manager.get_messages_for_request()
    assert _positions_kept(manager) == _positions_from_facts(manager) != {}


async def test_a_replay_leaves_little_to_the_cyclic_collector() -> None:
    """The command replays with the cyclic collector off (``cli._collector_paused``): what
    only the collector could free must stay the manager's own graph once the replay is over,
    and not grow with every request."""
    messages = generate_session(600, seed=3)
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    try:
        outcome = await replay(messages, config=ContextConfig(max_tokens=30_000), window=None)
        requests = len(outcome.report.requests)
        del outcome
        left = gc.collect()
    finally:
        if collecting:
            gc.enable()
    assert requests > 100
    # About eleven per message, all of them the manager's graph (its facts, their tuples, the
    # projected dicts, and what each left-out message gives the map: its lines, read once); a
    # cycle made on every request would add hundreds a request (over a hundred requests).
    assert left < 13 * len(messages)


def test_the_command_turns_the_collector_back_on() -> None:
    assert gc.isenabled()
    result = CliRunner().invoke(app, ["replay", "--messages", "60", "--json"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()
