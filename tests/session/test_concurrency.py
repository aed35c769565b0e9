"""Concurrency and cancellation: asyncio interleaving, and a CancelledError at every await.

Every await a public method can suspend at is reached through something the caller supplies:
the hooks registry (``emit``), the provider (``get_model_info`` / ``get_info``), the system
prompt factory, and the measured-view callbacks. The tests below enumerate those awaits by
running each call once with a tracer, then run it again for every await N with a
CancelledError injected there. The state must then be exactly as before the call when the
cancellation came before the ``context:compaction`` emission started, or exactly as after a
completed call once it had started; and the next ordinary request must return byte for byte
the view a twin manager (same messages, same earlier calls, no failed call) returns.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import Message
from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, check_view, mount

T = "2026-01-01T00:00:00.000Z"
BIG = "compiler output line that keeps going\n" * 100
REMINDER = '<system-reminder source="hooks-todo">Keep the todo list current.</system-reminder>'
AFTER_COMMIT = {
    "emit:context:compaction",
    "emit:context:post_compact",
    "emit:context:budget",
    "emit:context:tool_result_ingress_truncated",
}


def meta(**extra: Any) -> dict[str, Any]:
    return {"timestamp": T, **extra}


def prompt(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "metadata": meta()}


def call(ids: list[str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": i, "name": "bash", "input": {}} for i in ids],
        "tool_calls": [{"id": i, "tool": "bash", "arguments": {}} for i in ids],
        "metadata": meta(),
    }


def result(call_id: str, text: str = BIG) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text, "metadata": meta()}


# --- instrumented collaborators -------------------------------------------------------------


class Script:
    """Counts awaits reached through our doubles; cancels (or fails) at the chosen one."""

    def __init__(self, cancel_at: int | None = None, error: BaseException | None = None) -> None:
        self.cancel_at = cancel_at
        self.error = error or asyncio.CancelledError()
        self.trace: list[str] = []

    async def hit(self, name: str) -> None:
        await asyncio.sleep(0)  # a real suspension point, as a registry or network call has
        self.trace.append(name)
        if self.cancel_at is not None and len(self.trace) == self.cancel_at:
            self.cancel_at = None
            raise self.error


class Hooks:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        await self.script.hit(f"emit:{event}")
        self.events.append((event, data))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [d for e, d in self.events if e == event]


class Provider:
    """Publishes its window only through get_info(), so both info awaits are reached."""

    def __init__(self, script: Script) -> None:
        self.script = script

    async def get_model_info(self) -> dict[str, Any]:
        await self.script.hit("provider:get_model_info")
        return {"model": "gpt-4o"}

    async def get_info(self) -> dict[str, Any]:
        await self.script.hit("provider:get_info")
        return {"defaults": {"context_window": 30_000, "max_output_tokens": 4_000}}


def factory_for(script: Script) -> Callable[[], Awaitable[str]]:
    async def factory() -> str:
        await script.hit("factory")
        return "You are a careful engineer."

    return factory


def count_view_for(manager: SimpleContextManager, script: Script) -> Callable[..., Any]:
    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        await script.hit("count_view")
        tokens = manager._estimate_tokens(view) + 300
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": 10**9,
                "measurement": {"kind": "provider_count", "source": "test", "input_tokens": tokens},
            },
        }

    return count_view


# --- scenario and the calls under test -------------------------------------------------------


async def scenario(script: Script, *, actual: bool = False) -> SimpleContextManager:
    """A session one request away from an escalation, with one earlier escalation behind it."""
    manager = SimpleContextManager(
        hooks=Hooks(script), token_meter="actual" if actual else "estimate"
    )
    await manager.set_system_prompt_factory(factory_for(script))
    await manager.add_message(prompt("Refactor the parser."))
    await manager.add_message(
        {"role": "user", "content": REMINDER, "metadata": meta(ephemeral=True, persisted=True)}
    )
    for t in range(32):
        await manager.add_message(call([f"c{t}"]))
        await manager.add_message(result(f"c{t}"))
    await manager.get_messages_for_request(provider=Provider(script))
    assert manager.decisions.escalations == 1, "one escalation behind it"
    for t in range(32, 48):
        await manager.add_message(call([f"c{t}"]))
        await manager.add_message(result(f"c{t}"))
    script.trace.clear()
    manager.hooks.events.clear()
    return manager


HUGE_RESULT = "x" * 200_000  # over the 128 KiB ingress cap: the add emits an event


async def do_add(manager: SimpleContextManager, script: Script) -> Any:
    await manager.add_message(call(["late"]))
    await manager.add_message(result("late", HUGE_RESULT))


async def do_set(manager: SimpleContextManager, script: Script) -> Any:
    history = [dict(m) for m in manager.messages]
    await manager.set_messages([*history, call(["late"]), result("late", HUGE_RESULT)])


async def do_request(manager: SimpleContextManager, script: Script) -> Any:
    return await manager.get_messages_for_request(provider=Provider(script))


async def do_retaining(manager: SimpleContextManager, script: Script) -> Any:
    return await manager.get_messages_for_request_retaining(
        retain_contents=[REMINDER], provider=Provider(script)
    )


async def do_measured(manager: SimpleContextManager, script: Script) -> Any:
    reply = await manager.get_measured_request_view(
        provider=Provider(script),
        retain_contents=[REMINDER],
        count_view=count_view_for(manager, script),
    )
    assert await reply["transaction"].commit()
    return reply["base_view"]


CALLS: dict[str, tuple[Callable[..., Any], bool]] = {
    "add_message": (do_add, False),
    "set_messages": (do_set, False),
    "get_messages_for_request": (do_request, False),
    "get_messages_for_request_retaining": (do_retaining, False),
    "get_measured_request_view+commit": (do_measured, True),
}


def state_of(manager: SimpleContextManager) -> tuple[Any, ...]:
    return (
        manager.decisions,
        manager.compaction_stats,
        manager.token_meter_stats,
        copy.deepcopy(manager.messages),
    )


async def next_view(manager: SimpleContextManager) -> str:
    """The next ordinary request, with nothing left to cancel, as bytes."""
    view = await manager.get_messages_for_request(provider=Provider(Script()))
    assert check_view(view, history=manager.messages) == []
    for message in view:
        Message(**message)
    return json.dumps(view)


async def twin_after(name: str, *, completed: bool) -> tuple[tuple[Any, ...], str]:
    """State and next view of a twin that made the call (completed) or never made it."""
    operation, actual = CALLS[name]
    script = Script()
    twin = await scenario(script, actual=actual)
    if completed:
        await operation(twin, script)
    state = state_of(twin)
    twin.hooks = Hooks(Script())
    await twin.set_system_prompt_factory(factory_for(Script()))
    return state, await next_view(twin)


@pytest.mark.parametrize("name", list(CALLS))
async def test_cancellation_at_every_await_of_every_public_method(name: str) -> None:
    operation, actual = CALLS[name]
    tracer = Script()
    await operation(await scenario(tracer, actual=actual), tracer)
    trace = tracer.trace
    assert trace, "the call suspends at least once"
    before_state, untouched_view = await twin_after(name, completed=False)
    after_state, completed_view = await twin_after(name, completed=True)
    seen_phases = set()
    for n in range(1, len(trace) + 1):
        script = Script()
        manager = await scenario(script, actual=actual)
        assert state_of(manager) == before_state
        script.cancel_at = n
        with pytest.raises(asyncio.CancelledError):
            await operation(manager, script)
        where = trace[n - 1]
        assert script.trace[-1] == where, "the same await order on every run"
        committed = where in AFTER_COMMIT
        seen_phases.add(committed)
        assert state_of(manager) == (after_state if committed else before_state), where
        compactions = manager.hooks.named("context:compaction")
        if not committed:
            assert compactions == [], f"nothing delivered before the commit ({where})"
        manager.hooks = Hooks(Script())
        await manager.set_system_prompt_factory(factory_for(Script()))
        expected = completed_view if committed else untouched_view
        assert await next_view(manager) == expected, where
    if name.startswith("get_messages_for_request") or name.startswith("get_measured"):
        assert seen_phases == {False, True}, "both sides of the commit boundary were cancelled"
        assert {"provider:get_model_info", "provider:get_info", "factory"} <= set(trace)
        assert {"emit:context:pre_compact", "emit:context:compaction"} <= set(trace)


@pytest.mark.parametrize(
    "method",
    ["get_messages", "clear", "set_system_prompt_factory", "add_message", "set_messages"],
)
async def test_methods_without_a_supplied_await_never_suspend(method: str) -> None:
    """With nothing to emit, these run to completion in one step: no await can split them."""
    manager = SimpleContextManager()
    args: dict[str, tuple[Any, ...]] = {
        "get_messages": (),
        "clear": (),
        "set_system_prompt_factory": (None,),
        "add_message": (prompt("hi"),),
        "set_messages": ([prompt("a"), prompt("b")],),
    }
    coroutine = getattr(manager, method)(*args[method])
    with pytest.raises(StopIteration):
        coroutine.send(None)


async def fail_factory(manager: SimpleContextManager, script: Script) -> Any:
    async def broken() -> str:
        raise RuntimeError("factory down")

    await manager.set_system_prompt_factory(broken)
    try:
        await manager.get_messages_for_request(provider=Provider(script))
    finally:
        await manager.set_system_prompt_factory(factory_for(Script()))


async def fail_hard_fit(manager: SimpleContextManager, script: Script) -> Any:
    await manager.get_messages_for_request_retaining(
        retain_contents=[REMINDER], token_budget=100, hard_fit=True
    )


async def fail_unknown_reminder(manager: SimpleContextManager, script: Script) -> Any:
    await manager.get_messages_for_request_retaining(retain_contents=["never admitted"])


async def fail_bad_budget(manager: SimpleContextManager, script: Script) -> Any:
    await manager.get_messages_for_request(-3)


async def fail_count_view(manager: SimpleContextManager, script: Script) -> Any:
    async def broken(view: list[dict[str, Any]]) -> dict[str, Any]:
        raise RuntimeError("count endpoint down")

    await manager.get_measured_request_view(
        provider=Provider(script), retain_contents=[REMINDER], count_view=broken
    )


async def fail_bad_message(manager: SimpleContextManager, script: Script) -> Any:
    await manager.add_message({"role": "wizard", "content": "x"})


@pytest.mark.parametrize(
    ("failure", "error", "actual"),
    [
        (fail_factory, RuntimeError, False),
        (fail_hard_fit, ContextLengthError, False),
        (fail_unknown_reminder, ValueError, False),
        (fail_bad_budget, ValueError, False),
        (fail_count_view, RuntimeError, True),
        (fail_bad_message, ValueError, False),
    ],
)
async def test_a_failed_call_is_invisible_to_the_next_request(
    failure: Callable[..., Any], error: type[BaseException], actual: bool
) -> None:
    script = Script()
    manager = await scenario(script, actual=actual)
    before = state_of(manager)
    with pytest.raises(error):
        await failure(manager, script)
    assert state_of(manager) == before
    assert manager.hooks.named("context:compaction") == []
    twin = await scenario(Script(), actual=actual)
    assert await next_view(manager) == await next_view(twin)


@pytest.mark.parametrize("event", ["context:pre_compact", "context:compaction"])
async def test_task_cancel_while_a_hook_is_running(event: str) -> None:
    """A real ``task.cancel()`` while delivery is suspended inside a slow hook."""
    script = Script()
    manager = await scenario(script)
    before = state_of(manager)
    entered, release = asyncio.Event(), asyncio.Event()

    class SlowHooks(Hooks):
        async def emit(self, name: str, data: dict[str, Any]) -> None:
            if name == event:
                entered.set()
                await release.wait()
            await super().emit(name, data)

    manager.hooks = SlowHooks(Script())
    task = asyncio.create_task(do_request(manager, Script()))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after_state, completed_view = await twin_after("get_messages_for_request", completed=True)
    if event == "context:pre_compact":
        assert state_of(manager) == before
    else:
        assert state_of(manager) == after_state
    manager.hooks = Hooks(Script())
    await manager.set_system_prompt_factory(factory_for(Script()))
    assert await next_view(manager) == completed_view


# --- interleaving ------------------------------------------------------------------------------


class YieldingHooks:
    """A registry whose handlers await: delivery interleaves with other tasks."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        self.events.append(event)
        await asyncio.sleep(0)


async def writer(
    manager: SimpleContextManager, name: str, turns: int, rng: random.Random
) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    for t in range(turns):
        batch: list[dict[str, Any]]
        if rng.random() < 0.5:
            ids = [f"{name}{t}_{k}" for k in range(rng.randint(1, 3))]
            batch = [call(ids), *(result(i, BIG[: rng.randint(50, 3_000)]) for i in ids)]
        else:
            batch = [prompt(f"{name} says {t} " + "more " * rng.randint(0, 300))]
        for message in batch:
            await manager.add_message(message)
            sent.append(message)
            await asyncio.sleep(0)
    return sent


def key(message: dict[str, Any]) -> str:
    """A unique name for a writer's message: its prompt text or its tool-call ids."""
    if message.get("tool_calls"):
        return "call:" + ",".join(c["id"] for c in message["tool_calls"])
    if message["role"] == "tool":
        return "result:" + message["tool_call_id"]
    return "text:" + message["content"]


def assert_consistent(view: list[dict[str, Any]], final: list[dict[str, Any]]) -> None:
    """Valid, no message twice, history order kept (a result sits with its call)."""
    assert check_view(view) == []
    for message in view:
        Message(**message)
    positions = {id(m): i for i, m in enumerate(final)}
    calls = {c["id"]: i for i, m in enumerate(final) for c in m.get("tool_calls") or []}
    shown = [positions[id(m)] for m in view if id(m) in positions]
    assert len(shown) == len(set(shown)), "no message twice"
    anchors = [
        calls[m["tool_call_id"]] if m["role"] == "tool" else positions[id(m)]
        for m in view
        if id(m) in positions
    ]
    assert anchors == sorted(anchors), "history order kept"


@pytest.mark.parametrize("budget", [None, 9_000])
async def test_concurrent_adds_and_requests_never_tear_a_view_or_lose_a_message(
    budget: int | None,
) -> None:
    manager = SimpleContextManager(max_tokens=budget, hooks=YieldingHooks())
    await manager.add_message(prompt("Coordinate the three workers."))
    views: list[tuple[int, int, list[dict[str, Any]]]] = []
    done = asyncio.Event()

    async def reader() -> None:
        while not done.is_set():
            start = len(manager.messages)
            view = await manager.get_messages_for_request(budget)
            views.append((start, len(manager.messages), view))
            await asyncio.sleep(0)

    writers = [asyncio.create_task(writer(manager, n, 25, random.Random(n))) for n in "abc"]
    readers = [asyncio.create_task(reader()) for _ in range(3)]
    sent = await asyncio.gather(*writers)
    done.set()
    await asyncio.gather(*readers)
    final = await manager.get_messages()
    assert len(final) == 1 + sum(len(s) for s in sent), "no message lost or doubled"
    keys = [key(m) for m in final]
    assert len(set(keys)) == len(keys)
    for messages in sent:  # each writer's messages are all there, in its own order
        indices = [keys.index(key(m)) for m in messages]
        assert indices == sorted(indices)
    assert len(views) > 20
    for start, stop, view in views:
        assert_consistent(view, final)
        if budget is None:
            # Nothing compacts, so the view must be exactly the view of one history prefix
            # that existed while the request ran: never a mix of two.
            shown = json.dumps(view)
            candidates = []
            for size in range(start, stop + 1):
                twin = SimpleContextManager()
                await twin.set_messages(final[:size])
                candidates.append(json.dumps(await twin.get_messages_for_request()))
            assert shown in candidates, "a torn view"
    last = await manager.get_messages_for_request(budget)
    assert check_view(last, history=final) == []


async def test_events_through_the_real_hook_registry_under_concurrency() -> None:
    coordinator = MockCoordinator()
    await mount(coordinator, {"max_tokens": 6_000})
    manager: SimpleContextManager = coordinator.mount_points["context"]
    received: list[tuple[str, dict[str, Any]]] = []

    async def handler(event: str, data: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        received.append((event, data))

    for event in ("context:pre_compact", "context:compaction", "context:post_compact"):
        coordinator.hooks.register(event, handler, name=f"test-{event}")

    async def broken(event: str, data: dict[str, Any]) -> None:
        raise RuntimeError("a broken hook must not fail the request")

    coordinator.hooks.register("context:budget", broken, name="test-broken")
    await manager.add_message(prompt("Go."))
    writers = [asyncio.create_task(writer(manager, n, 12, random.Random(7))) for n in "xy"]
    views = []
    while not all(w.done() for w in writers):
        views.append(await manager.get_messages_for_request())
        await asyncio.sleep(0)
    await asyncio.gather(*writers)
    views.append(await manager.get_messages_for_request())
    for view in views:
        assert_consistent(view, manager.messages)
    compactions = [d for e, d in received if e == "context:compaction"]
    assert compactions, "events reached handlers through the host registry"
    assert all(d["messages_removed"] == len(d["removed_positions"]) for d in compactions)
    names = [e for e, _ in received]
    assert names.count("context:pre_compact") == names.count("context:post_compact")


# --- stale plans (regressions for what this suite found, fixed in 2bd4e4e) -----------------------


class GatedHooks:
    """Suspends delivery at ``context:pre_compact`` until released (a slow hook)."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        if event == "context:pre_compact" and self.gate is not None:
            gate, self.gate = self.gate, None
            await gate.wait()


async def gapped_session(manager: SimpleContextManager) -> None:
    """Tool groups with a protected message in the middle, so removals leave a gap."""
    await manager.add_message(prompt("go"))
    await manager.add_message(call(["o0"]))
    await manager.add_message(result("o0"))
    await manager.add_message(
        {
            "role": "assistant",
            "content": "loaded",
            "metadata": meta(**{"openai:tool_search_items": [1]}),
        }
    )
    for t in range(1, 20):
        await manager.add_message(call([f"o{t}"]))
        await manager.add_message(result(f"o{t}"))


NEW_SESSION = [
    prompt("new task"),
    {"role": "assistant", "content": "sure", "metadata": meta()},
    prompt("go on"),
    call(["n1", "n2"]),
    result("n1", "a"),
    result("n2", "b"),
    {"role": "assistant", "content": "done", "metadata": meta()},
    prompt("thanks"),
]


@pytest.mark.parametrize("reset", ["set_messages", "clear"])
async def test_a_request_suspended_across_a_reset_does_not_commit_old_positions(
    reset: str,
) -> None:
    """Its decisions name positions of the old session; committed, they split the new one."""
    hooks = GatedHooks()
    manager = SimpleContextManager(max_tokens=20_000, hooks=hooks)
    await gapped_session(manager)
    gate = hooks.gate = asyncio.Event()
    pending = asyncio.create_task(manager.get_messages_for_request())
    await asyncio.sleep(0.01)
    if reset == "clear":
        await manager.clear()
        for message in NEW_SESSION:
            await manager.add_message(message)
    else:
        await manager.set_messages(NEW_SESSION)
    gate.set()
    await pending
    view = await manager.get_messages_for_request()
    assert check_view(view, history=manager.messages) == []
    twin = SimpleContextManager(max_tokens=20_000)
    await twin.set_messages(NEW_SESSION)
    assert json.dumps(view) == json.dumps(await twin.get_messages_for_request())


async def test_a_measured_transaction_does_not_commit_after_a_reset() -> None:
    manager = SimpleContextManager(max_tokens=20_000, token_meter="actual")
    await gapped_session(manager)
    reply = await manager.get_measured_request_view(
        provider=None, retain_contents=[], count_view=count_view_for(manager, Script())
    )
    assert reply["outcome"] == "target_reached"
    await manager.set_messages(NEW_SESSION)
    assert await reply["transaction"].commit() is False
    assert check_view(await manager.get_messages_for_request(), history=manager.messages) == []


async def test_an_older_plan_does_not_overwrite_a_newer_escalation() -> None:
    """A request planned first but delivered last (slow hook) must not undo a newer one."""
    hooks = GatedHooks()
    manager = SimpleContextManager(max_tokens=20_000, hooks=hooks)
    await manager.add_message(prompt("go"))
    for t in range(20):
        await manager.add_message(call([f"c{t}"]))
        await manager.add_message(result(f"c{t}"))
    gate = hooks.gate = asyncio.Event()
    older = asyncio.create_task(manager.get_messages_for_request())
    await asyncio.sleep(0.01)
    for t in range(20, 30):
        await manager.add_message(call([f"c{t}"]))
        await manager.add_message(result(f"c{t}"))
    await manager.get_messages_for_request()
    newer = manager.decisions
    assert newer.escalations == 1
    gate.set()
    assert check_view(await older) == []
    assert manager.decisions is newer, "the newer escalation stays sticky"


async def test_a_commit_cancelled_at_pre_compact_can_be_retried_honestly() -> None:
    """A retry used to answer True without committing anything."""
    script = Script()
    manager = await scenario(script, actual=True)
    reply = await manager.get_measured_request_view(
        provider=Provider(script),
        retain_contents=[REMINDER],
        count_view=count_view_for(manager, script),
    )
    before = manager.decisions
    script.cancel_at = len(script.trace) + 1  # the next await: pre_compact inside commit
    with pytest.raises(asyncio.CancelledError):
        await reply["transaction"].commit()
    assert script.trace[-1] == "emit:context:pre_compact"
    assert manager.decisions is before
    answer = await reply["transaction"].commit()
    assert answer is True and manager.decisions is not before, "the retry really commits"
