"""Soak: 100,000 messages through add / request cycles with random budgets (slow; --run-slow).

Every view is checked with ``check_view``. Its history-dependent rules only look at the system
messages, the first and last human prompts and the latest assistant turn, so the test keeps
those four up to date as it goes and passes them as ``history``: the same verdict as the full
history, at O(1) instead of O(n) per view (the full-history form is used at every checkpoint).
Every 50th view is also built into the host's ``Message`` model.

Memory is traced with ``tracemalloc`` and must stay proportional to the history: bytes per
admitted message may not grow between checkpoints, and the manager's total may not exceed a
small multiple of what a plain copy of the history costs.

Run: ``uv run pytest tests/test_soak.py --run-slow -s`` (prints the figures).
"""

from __future__ import annotations

import gc
import json
import random
import time
import tracemalloc
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import Message

from amplifier_module_context_simple import SimpleContextManager, check_view
from amplifier_module_context_simple.vocabulary._messages import is_human_prompt

from .conftest import Recorder

TOTAL = 100_000
CHECKPOINTS = (20_000, 40_000, 60_000, 80_000, 100_000)
WORDS = (
    *("alpha", "beta", "gamma", "delta", "build", "test"),
    *("fix", "error", "path", "line", "value", "return"),
)


def text(rng: random.Random, size: int) -> str:
    words = rng.choices(WORDS, k=max(1, size // 6))
    return " ".join(words)[:size]


class Session:
    """A seeded stream of realistic turns, with the occasional damage a cancelled run leaves."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0
        self.owed: list[tuple[int, str]] = []  # (turns to wait, call id) of interrupted calls

    def turn(self) -> list[dict[str, Any]]:
        late = [i for wait, i in self.owed if wait == 0]
        self.owed = [(wait - 1, i) for wait, i in self.owed if wait > 0]
        # A result that arrives after later turns answers its call, wherever it stands.
        return [
            *({"role": "tool", "tool_call_id": i, "content": "late"} for i in late),
            *self._turn(),
        ]

    def _turn(self) -> list[dict[str, Any]]:
        rng = self.rng
        kind = rng.random()
        if kind < 0.12:
            return [{"role": "user", "content": text(rng, rng.randint(5, 1_500))}]
        if kind < 0.18:
            return [
                {
                    "role": "user",
                    "content": "<system-reminder>" + text(rng, 300) + "</system-reminder>",
                    "metadata": {"source": "hook", "ephemeral": True},
                }
            ]
        if kind < 0.30:
            return [{"role": "assistant", "content": text(rng, rng.randint(5, 2_000))}]
        width = rng.choice((1, 1, 1, 2, 3, 4))
        ids = [f"call_{self.calls + k}" for k in range(width)]
        self.calls += width
        content: list[dict[str, Any]] = []
        if rng.random() < 0.3:
            content.append({"type": "thinking", "thinking": text(rng, 200), "signature": "s"})
        content += [{"type": "tool_call", "id": i, "name": "bash", "input": {"n": i}} for i in ids]
        messages: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [{"id": i, "tool": "bash", "arguments": {"n": i}} for i in ids],
            }
        ]
        answered = ids
        if rng.random() < 0.01:  # an interrupted run: one result comes a few turns late
            answered = ids[:-1]
            self.owed.append((rng.randint(1, 5), ids[-1]))
        for call_id in answered:
            size = 200_000 if rng.random() < 0.0005 else rng.randint(20, 6_000)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text(rng, size)})
        if rng.random() < 0.005:
            messages.append({"role": "tool", "tool_call_id": "ghost", "content": "orphan"})
        return messages


class Digest:
    """The four things check_view's history rules read, kept current in O(1)."""

    def __init__(self) -> None:
        self.systems: list[dict[str, Any]] = []
        self.first_human: dict[str, Any] | None = None
        self.last_human: dict[str, Any] | None = None
        self.latest_assistant: dict[str, Any] | None = None

    def add(self, stored: dict[str, Any]) -> None:
        if stored["role"] == "system":
            self.systems.append(stored)
        elif stored["role"] == "assistant":
            self.latest_assistant = stored
        elif is_human_prompt(stored):
            self.first_human = self.first_human or stored
            self.last_human = stored

    def history(self) -> list[dict[str, Any]]:
        parts = [self.first_human, self.last_human, self.latest_assistant]
        return [*self.systems, *(m for m in parts if m is not None)]


def budget_phases(rng: random.Random) -> Any:
    while True:
        budget = rng.choice((8_000, 30_000, 60_000, 120_000, 120_000, 200_000, 200_000))
        for _ in range(rng.randint(50, 400) if budget > 8_000 else 20):
            yield budget


@pytest.mark.slow
async def test_soak_hundred_thousand_messages() -> None:
    rng = random.Random(8)
    session = Session(8)
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    digest = Digest()
    budgets = budget_phases(rng)
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    await manager.add_message({"role": "system", "content": "You are a careful engineer."})
    digest.add(manager.messages[-1])
    requests = hard_fits = refused = 0
    samples: list[tuple[int, int, float]] = []
    next_checkpoint = 0
    while len(manager.messages) < TOTAL:
        for message in session.turn():
            if len(manager.messages) >= TOTAL:
                break
            await manager.add_message(message)
            digest.add(manager.messages[-1])
        budget = next(budgets)
        if rng.random() < 0.02:  # an overflow-shrink retry with a tighter budget
            budget = rng.randint(3_000, budget)
        if rng.random() < 0.01:
            hard_fits += 1
            try:
                view = await manager.get_messages_for_request_retaining(
                    retain_contents=[], token_budget=budget, hard_fit=True
                )
            except ContextLengthError:
                refused += 1
                continue
        else:
            view = await manager.get_messages_for_request(budget)
        requests += 1
        problems = check_view(view, history=digest.history())
        assert problems == [], (len(manager.messages), problems)
        if requests % 50 == 0:
            for shown in view:
                Message(**shown)
        if len(manager.messages) >= CHECKPOINTS[next_checkpoint]:
            assert check_view(view, history=manager.messages) == []
            del view
            gc.collect()
            current = tracemalloc.get_traced_memory()[0] - baseline
            samples.append((len(manager.messages), current, time.perf_counter() - started))
            next_checkpoint += 1
            if next_checkpoint == len(CHECKPOINTS):
                break
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] - baseline
    held = tracemalloc.get_traced_memory()[0] - baseline
    # What the bare history costs: a fresh copy with its own strings (deepcopy shares them).
    dumped = json.dumps(manager.messages)
    before_copy = tracemalloc.get_traced_memory()[0]
    plain_copy = json.loads(dumped)
    history_bytes = tracemalloc.get_traced_memory()[0] - before_copy
    tracemalloc.stop()
    del plain_copy, dumped

    escalations = len(recorder.named("context:compaction"))
    print(
        f"\nsoak: {len(manager.messages)} messages, {requests} requests "
        f"({hard_fits} hard fits, {refused} refused), {escalations} escalations, "
        f"level {manager.compaction_level}, {elapsed:.1f} s, "
        f"{len(manager.messages) / elapsed:,.0f} messages/s, {requests / elapsed:,.0f} requests/s"
    )
    print(
        f"soak memory: peak {peak / 2**20:.1f} MiB, held {held / 2**20:.1f} MiB, "
        f"bare history {history_bytes / 2**20:.1f} MiB, "
        f"held/history {held / history_bytes:.2f}, peak/history {peak / history_bytes:.2f}"
    )
    for count, current, at in samples:
        print(f"  at {count:>7} messages: {current / count:,.0f} bytes/message, {at:.1f} s")
    assert len(manager.messages) == TOTAL, "every message admitted"
    assert escalations > 10
    per_message = [current / count for count, current, _ in samples]
    assert max(per_message) <= 1.3 * min(per_message), "memory grows faster than history"
    assert held <= 1.5 * history_bytes and peak <= 2 * history_bytes
