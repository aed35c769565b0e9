"""Caches that keep work from one request (or one view) to the next never go stale.

Each test drives a session through the states a cache is keyed on and compares what the
cached path gives with what a fresh computation gives.
"""

from __future__ import annotations

import itertools
from typing import Any

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple._render import notice

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


async def test_the_notice_is_reused_only_while_it_reads_the_same() -> None:
    manager = SimpleContextManager(max_tokens=12_000)
    await manager.add_message({"role": "user", "content": "Fix the failing build please."})
    state = manager._state  # pyright: ignore[reportPrivateUsage]
    verbosity = manager.config.compaction_notice_verbosity
    notices: list[dict[str, Any]] = []
    escalations: set[int] = set()
    for t in range(40):
        await _turn(manager, t)
        view = await manager.get_messages_for_request()
        if not _is_notice(view[-1]):
            continue
        assert state.stats is not None
        # What a fresh notice for the decisions in force says, after every request.
        assert view[-1] == notice(state.stats, state.decisions, verbosity)
        notices.append(view[-1])
        escalations.add(state.decisions.escalations)
    assert len(escalations) > 1, "the session escalates more than once"
    for earlier, later in itertools.pairwise(notices):
        same = earlier["content"] == later["content"]
        assert (earlier is later) == same, "one dict exactly while the text is the same"
