"""One size of the benchmark, measured in the current process.

The parent process (``__main__``) runs :func:`measure_size` in a fresh child per size, so a
large history never shares a heap, an allocator state or a garbage-collector generation with a
smaller one. Everything measured here is a plain JSON-safe dict (see :func:`measure_size`).

Workloads, in the order they run (timings first, memory last, so tracing never slows a timing):

1. the unit: ``json.dumps(history)`` best-of-N;
2. admission: every message through ``add_message`` on a fresh manager, best-of-N;
3. right after each admission run, the first request on that freshly filled manager (it
   estimates every message once: the manager estimates lazily, at the first request that sees
   a message): below the trigger, or (every other run) escalating at once; then a resume: a new
   manager, ``set_messages`` with fresh copies of the stored history, and its first request
   (below the trigger, escalating, and with the default budget, under which the running
   session would have compacted all along: the resume re-derives each of those compactions);
4. the steady state below the trigger: a warm request with nothing new, and a request right
   after one new turn (an assistant tool call and its result) was added;
5. the first escalation: a budget chosen so the full view is ``OVER_TRIGGER`` times the
   compaction trigger, on a manager whose estimates and render cache are already warm (as in a
   running session), repeated through ``snapshot``/``restore`` (the cold variant is in 3.);
6. a sticky request after that escalation with one turn added, which must stay below the
   trigger (checked: no new compaction event, same level); then the persistent subclass's
   pattern: ``messages`` re-assigned as new dicts of the same content before a request;
7. the estimator alone over the whole history;
8. memory with ``tracemalloc``: the history, the manager's own structures, one view.
"""

from __future__ import annotations

import copy
import gc
import itertools
import json
import math
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.replay.recordings.example_session import generate_session

T = TypeVar("T")
Message = dict[str, Any]

HUGE_BUDGET = 2_000_000_000
"""An explicit budget far above any generated session (the meter caps budgets at 2**31 - 1)."""
OVER_TRIGGER = 1.3
"""For the escalation: the full view's estimate divided by the compaction trigger."""
SEED = 7


@dataclass(frozen=True, slots=True)
class Repeats:
    """How many runs each figure takes (the best one is reported)."""

    unit: int
    admit: int
    requests: int
    escalations: int
    estimator: int
    rereads: int

    @classmethod
    def for_size(cls, size: int, *, quick: bool) -> Repeats:
        if quick:
            return cls(unit=3, admit=2, requests=5, escalations=2, estimator=1, rereads=1)
        if size <= 2_000:
            return cls(unit=7, admit=5, requests=25, escalations=5, estimator=3, rereads=3)
        if size <= 20_000:
            return cls(unit=5, admit=4, requests=20, escalations=3, estimator=2, rereads=2)
        return cls(unit=3, admit=3, requests=15, escalations=3, estimator=1, rereads=1)


class EventRecorder:
    """A hooks object that counts events and keeps the scalar part of compaction payloads."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.compactions: list[dict[str, Any]] = []

    async def emit(self, event: str, data: Mapping[str, Any]) -> None:
        self.counts[event] += 1
        if event == "context:compaction":
            self.compactions.append(
                {k: v for k, v in data.items() if isinstance(v, int | float | str | bool)}
            )


# ---------------------------------------------------------------- timing helpers


def _clock(fn: Callable[[], T]) -> tuple[float, T]:
    """Time one synchronous call with the collector paused (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, result


async def _aclock(fn: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    """Time one awaited call with the collector paused."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        result = await fn()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, result


def _figure(samples: list[float], unit: float, note: str = "") -> dict[str, Any]:
    best = min(samples)
    return {
        "seconds": best,
        "median_seconds": statistics.median(samples),
        "runs": len(samples),
        "ratio": best / unit,
        "note": note,
    }


# ---------------------------------------------------------------- workload pieces


def _turn_template() -> tuple[Message, Message]:
    """A representative turn: an assistant message with one tool call, and its result.

    Taken from a fixed 400-message session (not from the measured history), so every size adds
    the very same turn: the single-call round whose JSON size is the median of all of them.
    """
    session = generate_session(400, seed=SEED)
    rounds: list[tuple[int, Message, Message]] = []
    for message, nxt in itertools.pairwise(session):
        calls = message.get("tool_calls")
        if (
            message.get("role") == "assistant"
            and isinstance(calls, list)
            and len(calls) == 1
            and nxt.get("role") == "tool"
        ):
            rounds.append((len(json.dumps([message, nxt])), message, nxt))
    rounds.sort(key=lambda r: r[0])
    _, call, result = rounds[len(rounds) // 2]
    return call, result


def make_turns(count: int, tag: str) -> list[list[Message]]:
    """``count`` copies of the template turn, with call ids that pair only within a turn."""
    template = _turn_template()
    turns: list[list[Message]] = []
    for k in range(count):
        call, result = copy.deepcopy(template)
        new_id = f"bench_{tag}_{k:06d}"
        for c in call["tool_calls"]:
            c["id"] = new_id
        content = call.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_call":
                    block["id"] = new_id
        result["tool_call_id"] = new_id
        turns.append([call, result])
    return turns


async def admit_all(manager: SimpleContextManager, messages: Iterable[Message]) -> None:
    for message in messages:
        await manager.add_message(message)


def estimated_tokens(manager: SimpleContextManager) -> int:
    stats = manager.token_meter_stats
    if stats is None:
        raise RuntimeError("no request has run yet")
    return int(stats["estimated"])


def escalation_budget(estimated: int, manager: SimpleContextManager) -> int:
    """The explicit budget whose trigger is ``estimated / OVER_TRIGGER``."""
    config = manager.config
    # The inverse of ``config.trigger``: the usable part the trigger needs, plus the reserve.
    return math.ceil(estimated / (OVER_TRIGGER * config.compact_threshold)) + config.notice_reserve


def _deep_sizeof(root: object) -> int:
    """``sys.getsizeof`` summed over every distinct object reachable through containers."""
    seen: set[int] = set()
    stack: list[object] = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
    return total


def _traced(fn: Callable[[], T]) -> tuple[int, int, T]:
    """Run ``fn`` under tracemalloc: (retained bytes, peak bytes above the start, result)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return current - base, peak - base, result


async def _atraced(fn: Callable[[], Awaitable[T]]) -> tuple[int, int, T]:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = await fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return current - base, peak - base, result


# ---------------------------------------------------------------- the measurement


async def measure_size(size: int, *, quick: bool = False) -> dict[str, Any]:
    """Every figure for one history size (see the module docstring for the workloads)."""
    reps = Repeats.for_size(size, quick=quick)
    wall = time.perf_counter()
    phases: dict[str, float] = {}
    last = wall

    def phase(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name] = now - last
        last = now

    generate_s, history = _clock(lambda: generate_session(size, seed=SEED))
    encoded_len = len(json.dumps(history))
    phase("generate")

    # 1. the unit
    unit_runs = [_clock(lambda: json.dumps(history))[0] for _ in range(reps.unit)]
    unit = min(unit_runs)
    figures: dict[str, dict[str, Any]] = {}
    checks: dict[str, Any] = {}
    phase("unit")

    # 2./3. admission, each run on a fresh manager, and right after it one cold request: the
    # first request that sees the messages estimates every one of them. Run 0 is below the
    # trigger (and its manager is kept for everything after); later runs alternate between
    # a cold escalation and another cold request below the trigger, then are dropped.
    admit_runs: list[float] = []
    cold_runs: list[float] = []
    cold_esc_runs: list[float] = []
    cold_compacted = True
    kept: tuple[SimpleContextManager, EventRecorder] | None = None
    estimated = 0
    for k in range(max(reps.admit, 2)):
        recorder = EventRecorder()
        manager = SimpleContextManager(hooks=recorder)
        elapsed, _ = await _aclock(lambda m=manager: admit_all(m, history))
        admit_runs.append(elapsed)
        if k % 2 == 0:
            elapsed, _ = await _aclock(lambda m=manager: m.get_messages_for_request(HUGE_BUDGET))
            cold_runs.append(elapsed)
        else:
            elapsed, compacted = await _cold_escalation(manager, recorder, estimated)
            cold_esc_runs.append(elapsed)
            cold_compacted = cold_compacted and compacted
        if kept is None:
            kept = (manager, recorder)
            estimated = estimated_tokens(manager)
        del manager, recorder
    if kept is None:
        raise RuntimeError("no admission run")
    main, events = kept
    del kept
    figures["admit_total"] = _figure(admit_runs, unit, "all messages via add_message")
    figures["admit_per_message"] = {
        **_figure([t / size for t in admit_runs], unit / size),
        "note": "admit_total / messages (ratio: to json.dumps / messages)",
    }
    figures["request_first_cold"] = _figure(
        cold_runs, unit, "first request after admitting all: estimates every message once"
    )
    figures["admit_plus_estimate"] = _figure(
        [min(admit_runs) + min(cold_runs)],
        unit,
        "best admission + best cold first request (the deferred estimate)",
    )
    figures["escalation_first_cold"] = _figure(
        cold_esc_runs, unit, "first request of a freshly filled manager escalates"
    )
    checks["history_estimated_tokens"] = estimated
    checks["cold_escalation_compacted"] = cold_compacted
    phase("admission and cold requests")

    # 3b. a resume: what the running session stored, read back as new dicts (a JSON round
    # trip outside the timed call, as context-persistent reads its file after a restart),
    # handed to a new manager, and its first request, below the trigger and escalating
    stored_text = json.dumps(main.messages)
    resume_runs: list[float] = []
    resume_esc_runs: list[float] = []
    for k in range(max(reps.admit, 2)):
        fresh = json.loads(stored_text)
        budget = HUGE_BUDGET if k % 2 == 0 else escalation_budget(estimated, main)
        elapsed, _ = await _aclock(lambda f=fresh, b=budget: _resume(f, b))
        (resume_runs if k % 2 == 0 else resume_esc_runs).append(elapsed)
        del fresh
    figures["resume_first_request"] = _figure(
        resume_runs, unit, "new manager, set_messages(fresh copies), first request"
    )
    figures["resume_first_escalation"] = _figure(
        resume_esc_runs, unit, "the same, its first request escalates"
    )
    # A session that compacted all along: no budget given, so the default window holds, and
    # the resume re-derives every escalation the running session made on the way.
    compacted_runs: list[float] = []
    for _ in range(max(reps.admit, 2)):
        fresh = json.loads(stored_text)
        elapsed, view = await _aclock(lambda f=fresh: _resume(f, None))
        compacted_runs.append(elapsed)
        checks["resume_compacted_view_messages"] = len(view)
        del fresh
    figures["resume_compacted"] = _figure(
        compacted_runs, unit, "the same, default budget: the walk re-makes every compaction"
    )
    phase("resume")

    # 4. steady state below the trigger
    warm_runs = [
        (await _aclock(lambda: main.get_messages_for_request(HUGE_BUDGET)))[0]
        for _ in range(reps.requests)
    ]
    figures["request_below_warm"] = _figure(warm_runs, unit, "below trigger, nothing new")
    turn_runs: list[float] = []
    for call, result in make_turns(reps.requests, "below"):
        await main.add_message(call)
        await main.add_message(result)
        turn_runs.append((await _aclock(lambda: main.get_messages_for_request(HUGE_BUDGET)))[0])
    figures["request_below_turn"] = _figure(turn_runs, unit, "below trigger, one turn added")
    checks["below_trigger_compactions"] = events.counts["context:compaction"]
    phase("below trigger")

    # 5. the first escalation
    estimated = estimated_tokens(main)
    budget = escalation_budget(estimated, main)
    trigger = main.config.trigger(budget)
    checks["escalation_budget"] = budget
    checks["escalation_over_trigger"] = estimated / trigger
    esc_runs: list[float] = []
    can_rollback = hasattr(main, "snapshot") and hasattr(main, "restore")
    before = main.snapshot() if can_rollback else None
    for k in range(reps.escalations if can_rollback else 1):
        if k and before is not None:
            main.restore(before)
            # A running session has the uncompacted prefix rendered and cached already.
            await main.get_messages_for_request(HUGE_BUDGET)
        count = events.counts["context:compaction"]
        elapsed, view = await _aclock(lambda: main.get_messages_for_request(budget))
        if events.counts["context:compaction"] != count + 1:
            raise RuntimeError("the escalation workload did not compact; check the budget")
        esc_runs.append(elapsed)
        del view
    figures["escalation_first"] = _figure(
        esc_runs, unit, f"full view {OVER_TRIGGER}x the trigger, warm estimates"
    )
    compaction = events.compactions[-1]
    checks["escalation_level"] = main.compaction_level
    checks["escalation_before_tokens"] = compaction.get("before_tokens")
    checks["escalation_after_tokens"] = compaction.get("after_tokens")
    checks["escalation_before_messages"] = compaction.get("before_messages")
    checks["escalation_after_messages"] = compaction.get("after_messages")
    phase("escalation")

    # 6. sticky: one turn added after the escalation, still below the trigger
    level = main.compaction_level
    count = events.counts["context:compaction"]
    sticky_runs: list[float] = []
    for call, result in make_turns(reps.requests, "sticky"):
        await main.add_message(call)
        await main.add_message(result)
        sticky_runs.append((await _aclock(lambda: main.get_messages_for_request(budget)))[0])
    figures["sticky_turn"] = _figure(sticky_runs, unit, "after the escalation, one turn added")
    checks["sticky_stayed_below_trigger"] = (
        events.counts["context:compaction"] == count and main.compaction_level == level
    )
    checks["sticky_usage_of_trigger"] = estimated_tokens(main) / trigger
    phase("sticky")

    # 6b. the persistent subclass pattern: before each request it assigns ``messages`` a list
    # of freshly parsed dicts (same content, same positions, every object new), here by a JSON
    # round trip outside the timed call
    reread_runs: list[float] = []
    for _ in range(reps.rereads):
        main.messages = json.loads(json.dumps(main.messages))
        reread_runs.append((await _aclock(lambda: main.get_messages_for_request(budget)))[0])
    figures["request_reread"] = _figure(
        reread_runs, unit, "history re-assigned as new, equal dicts (persistent subclass)"
    )
    checks["reread_kept_decisions"] = (
        events.counts["context:compaction"] == count and main.compaction_level == level
    )
    await main.get_messages_for_request(budget)  # warm again for the memory phase
    phase("re-read")

    # 7. the estimator alone
    def estimate_all() -> int:
        return sum(estimate_message_tokens(m) for m in history)

    est_runs: list[float] = []
    est_tokens = 0
    for _ in range(reps.estimator):
        elapsed, est_tokens = _clock(estimate_all)
        est_runs.append(elapsed)
    figures["estimator_pass"] = _figure(est_runs, unit, "estimate_message_tokens over history")
    estimator = {
        "messages_per_s": size / min(est_runs),
        "tokens_per_s": est_tokens / min(est_runs),
        "json_bytes_per_s": encoded_len / min(est_runs),
        "tokens": est_tokens,
    }
    phase("estimator")

    # 8. memory
    memory = await _memory(history, main, budget)
    phase("memory")
    return {
        "size": size,
        "quick": quick,
        "history": {
            "messages": size,
            "json_bytes": encoded_len,
            "generate_seconds": generate_s,
        },
        "unit": {"name": "json.dumps(history)", "seconds": unit, "runs": unit_runs},
        "figures": figures,
        "estimator": estimator,
        "memory": memory,
        "checks": checks,
        "phases": phases,
        "worker_seconds": time.perf_counter() - wall,
    }


async def _resume(fresh: list[Message], budget: int | None) -> list[Any]:
    manager = SimpleContextManager(hooks=EventRecorder())
    await manager.set_messages(fresh)
    return await manager.get_messages_for_request(budget)


async def _cold_escalation(
    manager: SimpleContextManager, recorder: EventRecorder, estimated: int
) -> tuple[float, bool]:
    budget = escalation_budget(estimated, manager)
    elapsed, _ = await _aclock(lambda: manager.get_messages_for_request(budget))
    return elapsed, recorder.counts["context:compaction"] == 1


async def _memory(
    history: list[Message], warm: SimpleContextManager, budget: int
) -> dict[str, Any]:
    """tracemalloc figures; the history's size is what building it leaves allocated."""
    history_traced, history_peak, copy_of_history = _traced(
        lambda: generate_session(len(history), seed=SEED)
    )
    del copy_of_history
    deep = _deep_sizeof(history)

    manager_figures = await _manager_memory(history)

    # One view of the compacted (sticky) state: shortened results are new dicts.
    async def compacted() -> list[Any]:
        return await warm.get_messages_for_request(budget)

    sticky_bytes, sticky_peak, sticky_view = await _atraced(compacted)
    sticky_len = len(sticky_view)
    del sticky_view
    return {
        "history_traced_bytes": history_traced,
        "history_build_peak_bytes": history_peak,
        "history_deep_sizeof_bytes": deep,
        **manager_figures,
        "sticky_view_bytes": sticky_bytes,
        "sticky_view_peak_bytes": sticky_peak,
        "sticky_view_messages": sticky_len,
    }


async def _manager_memory(history: list[Message]) -> dict[str, Any]:
    """A fresh manager under tracemalloc: its own structures, then one uncompacted view."""

    # The manager's own structures: stored message dicts (a shallow copy with metadata added,
    # sharing every string and nested value with the caller's history), per-message facts and
    # the render cache. The first request is part of it, since it builds the facts.
    async def fill() -> SimpleContextManager:
        manager = SimpleContextManager()
        await admit_all(manager, history)
        return manager

    admit_bytes, admit_peak, fresh = await _atraced(fill)

    async def first_request() -> None:
        await fresh.get_messages_for_request(HUGE_BUDGET)  # the view is dropped at once

    index_bytes, index_peak, _ = await _atraced(first_request)

    # One view below the trigger, from that (now warm, never compacted) manager.
    async def below() -> list[Any]:
        return await fresh.get_messages_for_request(HUGE_BUDGET)

    view_bytes, view_peak, view = await _atraced(below)
    return {
        "manager_admission_bytes": admit_bytes,
        "manager_admission_peak_bytes": admit_peak,
        "manager_first_request_bytes": index_bytes,
        "manager_first_request_peak_bytes": index_peak,
        "manager_bytes": admit_bytes + index_bytes,
        "manager_peak_bytes": max(admit_peak, admit_bytes + index_peak),
        "view_bytes": view_bytes,
        "view_peak_bytes": view_peak,
        "view_messages": len(view),
    }
