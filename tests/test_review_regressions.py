"""Regressions for what a code review of the package found (one test per finding)."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens

from .conftest import Recorder

BIG = "compiler output line that keeps going\n" * 300


def call(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "tool": "x"}]}


async def with_orphans(manager: SimpleContextManager) -> None:
    await manager.add_message({"role": "user", "content": "go"})
    for i in range(3):  # results whose call was lost, e.g. in a resumed transcript
        await manager.add_message({"role": "tool", "tool_call_id": f"ghost{i}", "content": BIG})
    for i in range(14):
        await manager.add_message(call(i))
        await manager.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": BIG[:3000]})
    await manager.add_message({"role": "user", "content": "continue"})


async def test_orphan_results_are_not_counted_as_reductions() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=8_000, hooks=recorder)
    await with_orphans(manager)
    await manager.get_messages_for_request()
    [event] = recorder.named("context:compaction")
    assert not {1, 2, 3} & set(event["truncated_positions"] + event["removed_positions"])
    assert event["after_tokens"] < event["before_tokens"]
    fitted = SimpleContextManager()
    await with_orphans(fitted)
    view = await fitted.get_messages_for_request_retaining(
        retain_contents=[], token_budget=6_000, hard_fit=True
    )
    assert fitted._estimate_tokens(view) <= 6_000


async def test_measured_commit_without_compaction_still_reports_the_budget() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(token_meter="actual", hooks=recorder)
    await manager.add_message({"role": "user", "content": "hello"})

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        n = manager._estimate_tokens(view) + 300
        measurement = {"kind": "provider_count", "source": "x", "input_tokens": n}
        return {
            "dispatch": view,
            "budget_decision": {
                "estimated_input_tokens": n,
                "input_limit_tokens": 90_000,
                "measurement": measurement,
            },
        }

    result = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=count_view
    )
    assert result["outcome"] == "not_needed"
    assert await result["transaction"].commit() is True
    assert len(recorder.named("context:budget")) == 1


async def test_budget_event_once_for_concurrent_requests() -> None:
    class SlowHooks(Recorder):
        async def emit(self, event: str, data: dict) -> None:
            await asyncio.sleep(0)
            await super().emit(event, data)

    hooks = SlowHooks()
    manager = SimpleContextManager(hooks=hooks)
    await manager.add_message({"role": "user", "content": "hi"})
    await asyncio.gather(manager.get_messages_for_request(), manager.get_messages_for_request())
    assert len(hooks.named("context:budget")) == 1


async def test_level_never_drops_while_earlier_reductions_stay() -> None:
    rng = random.Random(0)  # a session where a later escalation needed a lower rung
    manager = SimpleContextManager(
        max_tokens=8_000,
        protected_tool_results=rng.choice([0, 1, 2, 5]),
        protected_recent=rng.choice([0.1, 0.3]),
        compaction_notice_min_level=4,
    )
    await manager.add_message({"role": "user", "content": "go"})
    levels: list[int] = []
    for i in range(150):
        await manager.add_message(call(i))
        size = rng.choice([5, 20, 80, 300])
        await manager.add_message(
            {"role": "tool", "tool_call_id": f"c{i}", "content": "line of output here\n" * size}
        )
        if rng.random() < 0.2:
            await manager.add_message({"role": "user", "content": "next " * rng.randint(1, 50)})
        view = await manager.get_messages_for_request()
        levels.append(manager.compaction_level)
        if manager.compaction_level >= 4:
            assert any(m.get("metadata", {}).get("source") == "context-compaction" for m in view)
    assert max(levels) >= 4
    assert levels == sorted(levels)


async def test_the_above_target_warning_gives_the_view_s_size_without_its_notice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The last prompt alone is larger than the target: whatever is left out, the view stays
    # above it, and the warning gives what the view holds besides the notice.
    manager = SimpleContextManager(max_tokens=6_000)
    await manager.add_message({"role": "user", "content": "Read the logs."})
    for i in range(12):
        await manager.add_message(call(i))
        await manager.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": BIG[:1800]})
    await manager.add_message({"role": "user", "content": "and now this " * 900})
    with caplog.at_level(logging.WARNING):
        view = await manager.get_messages_for_request()
    notices = [m for m in view if m.get("metadata", {}).get("source") == "context-compaction"]
    assert len(notices) == 1
    body = sum(estimate_message_tokens(m) for m in view if m not in notices)
    [above] = [r.getMessage() for r in caplog.records if "stays above" in r.getMessage()]
    assert f"the view (~{body} tokens) stays above the compaction target" in above
    assert "protected content" in above


async def test_no_above_target_warning_after_a_hard_fit_that_met_its_target(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    for i in range(40):
        await manager.add_message(call(i))
        await manager.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": BIG[:2400]})
    with caplog.at_level(logging.WARNING):
        await manager.get_messages_for_request_retaining(
            retain_contents=[], token_budget=20_000, hard_fit=True
        )
    assert manager.compaction_level > 0
    assert "stays above the compaction target" not in caplog.text


async def test_system_prompt_is_estimated_once_not_per_request() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "hi"})

    async def factory() -> str:
        return "You are a careful engineer. " * 4_000

    await manager.set_system_prompt_factory(factory)
    await manager.get_messages_for_request()
    calls = manager.planner.index.estimator_calls
    for _ in range(5):
        await manager.get_messages_for_request()
    seen = [1] * (manager.planner.index.estimator_calls - calls)
    assert seen == []
