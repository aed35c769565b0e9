"""cProfile one workload of the benchmark: ``python -m benchmarks --profile NAME --sizes N``.

Only the named call is profiled; the setup (generating the session, filling and warming the
manager) runs outside the profiler. The report lists the top functions by cumulative and by own
time.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
from collections.abc import Awaitable, Callable

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.replay.recordings.example_session import generate_session

from ._measure import (
    HUGE_BUDGET,
    SEED,
    EventRecorder,
    admit_all,
    escalation_budget,
    estimated_tokens,
    make_turns,
)

WORKLOADS = (
    "admit",
    "first_request",
    "resume",
    "resume_escalating",
    "resume_compacted",
    "turn",
    "escalation",
    "sticky",
    "reread",
    "estimator",
)
TURNS = 20


async def profile(name: str, size: int, *, top: int = 30) -> str:
    """Run workload ``name`` at ``size`` messages under cProfile; return the printed stats."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; expected one of {WORKLOADS}")
    history = generate_session(size, seed=SEED)
    manager = SimpleContextManager(hooks=EventRecorder())
    profiler = cProfile.Profile()

    async def run(fn: Callable[[], Awaitable[object]]) -> None:
        profiler.enable()
        try:
            await fn()
        finally:
            profiler.disable()

    if name == "admit":
        await run(lambda: admit_all(manager, history))
    elif name.startswith("resume"):
        # what the running session stored, read back as new dicts (outside the profile)
        await admit_all(manager, history)
        stored = json.loads(json.dumps(manager.messages))
        budget: int | None = HUGE_BUDGET
        if name == "resume_compacted":
            # the default window: the walk re-makes every compaction the session made
            budget = None
        elif name == "resume_escalating":
            await manager.get_messages_for_request(HUGE_BUDGET)
            budget = escalation_budget(estimated_tokens(manager), manager)
        fresh = SimpleContextManager(hooks=EventRecorder())

        async def resume() -> None:
            await fresh.set_messages(stored)
            await fresh.get_messages_for_request(budget)

        await run(resume)
    elif name == "estimator":
        profiler.enable()
        sum(estimate_message_tokens(m) for m in history)
        profiler.disable()
    else:
        await admit_all(manager, history)
        if name == "first_request":
            await run(lambda: manager.get_messages_for_request(HUGE_BUDGET))
        else:
            await manager.get_messages_for_request(HUGE_BUDGET)
            budget = escalation_budget(estimated_tokens(manager), manager)
            if name == "turn":
                for call, result in make_turns(TURNS, "profile"):
                    await manager.add_message(call)
                    await manager.add_message(result)
                    await run(lambda: manager.get_messages_for_request(HUGE_BUDGET))
            elif name == "escalation":
                await run(lambda: manager.get_messages_for_request(budget))
            elif name == "reread":  # the persistent subclass: equal content, all-new objects
                manager.messages = json.loads(json.dumps(manager.messages))
                await run(lambda: manager.get_messages_for_request(HUGE_BUDGET))
            else:  # sticky
                await manager.get_messages_for_request(budget)
                for call, result in make_turns(TURNS, "profile"):
                    await manager.add_message(call)
                    await manager.add_message(result)
                    await run(lambda: manager.get_messages_for_request(budget))
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer).strip_dirs()
    buffer.write(f"== {name} at {size} messages: by cumulative time ==\n")
    stats.sort_stats("cumulative").print_stats(top)
    buffer.write(f"== {name} at {size} messages: by own time ==\n")
    stats.sort_stats("tottime").print_stats(top)
    return buffer.getvalue()
