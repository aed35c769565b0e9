"""``context:budget`` goes out only when the budget changes: under a provider whose overhead is
constant (its readings ``k * estimate + c``), ``token_meter: actual`` learns ``c`` once and the
budget then holds through every compaction cycle (a real kernel's hook registry)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.readings._learned_overhead import LearnedOverhead, stepped
from amplifier_module_context_simple.readings._meter import OVERHEAD_STEP

from ..sizing.test_request_budget import DefaultsOnly, answer, estimate, mounted

REQUESTS = 150
FIT_NOISE = 8
"""Tokens the fitted bias may be off by: an overhead at a step's edge may round up a step."""


async def _session(
    k: float, constant: int, requests: int = REQUESTS
) -> tuple[SimpleContextManager, list[dict[str, Any]]]:
    """A tool loop whose results fill the window several times over, each view answered by a
    provider that counts ``k * estimate + constant``."""
    coordinator, manager, budgets = await mounted({"token_meter": "actual"})
    provider = DefaultsOnly(context_window=64_000)
    await manager.add_message({"role": "user", "content": "start the work"})
    for i in range(requests):
        view = await manager.get_messages_for_request(provider=provider)
        await answer(coordinator, math.ceil(k * estimate(view)) + constant)
        call = {"id": f"c{i}", "tool": "read", "name": "read", "arguments": {"path": f"f{i}.py"}}
        await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        result = f"line {i} of the file\n" * 300
        await manager.add_message({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return manager, budgets


async def test_the_issues_provider_gets_a_budget_that_holds_through_the_compactions() -> None:
    manager, budgets = await _session(1.1, 900)
    assert manager.decisions.escalations >= 5  # several compaction cycles
    # The first budget (nothing learned yet), the one the first readings teach, and at most
    # one more once the size model's slope is known: never once per request.
    assert len(budgets) <= 3, [b["learned_overhead_tokens"] for b in budgets]
    learned = budgets[-1]["learned_overhead_tokens"]
    assert 900 <= learned <= 900 + OVERHEAD_STEP
    assert abs(manager.token_meter_stats["overhead"] - 900) <= 2


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([1.0, 1.05, 1.2, 1.35]), st.integers(min_value=0, max_value=4_000))
async def test_a_constant_overhead_is_learned_once_whatever_the_bias(k: float, c: int) -> None:
    _, budgets = await _session(k, c, requests=90)
    assert len(budgets) <= 3, [b["learned_overhead_tokens"] for b in budgets]
    # Never below the overhead, and at most a step above it and the fitted bias's noise.
    assert c <= budgets[-1]["learned_overhead_tokens"] <= c + OVERHEAD_STEP + FIT_NOISE


@given(
    st.integers(min_value=1, max_value=40).map(lambda n: n * OVERHEAD_STEP),
    st.lists(st.integers(min_value=-3, max_value=3), min_size=2, max_size=40),
)
def test_an_overhead_at_a_steps_edge_is_held_still(edge: int, noise: list[int]) -> None:
    # A constant overhead right at a step's edge, read through a few tokens of noise: the
    # held figure is never below a reading, rises at most once and never comes down (each
    # move is a budget event).
    held = [0]
    for error in noise:
        held.append(stepped(held[-1], edge + error))
        assert held[-1] >= edge + error
    assert held[1:] == sorted(held[1:]) and len(set(held[1:])) <= 2, held
    assert held[-1] <= edge + OVERHEAD_STEP


def test_the_held_overhead_comes_down_only_past_two_steps_or_its_share() -> None:
    # Two steps of room decide for a small figure: 1,024 held, a reading 512 below stays put.
    assert stepped(1_024, 1_024 - 2 * OVERHEAD_STEP) == 1_024
    assert stepped(1_024, 1_024 - 2 * OVERHEAD_STEP - 1) == 2 * OVERHEAD_STEP
    # The share decides for a large one: a tenth of 10,240 is more than two steps.
    assert stepped(10_240, 10_240 - 1_024) == 10_240
    assert stepped(10_240, 10_240 - 1_025) == 10_240 - 1_024


def test_each_meter_mode_holds_back_its_own_figure() -> None:
    # The estimator's bias is part of the whole excess but not of the fixed one: a budget on
    # estimates holds the whole back, one on readings only what readings do not already see.
    learned = LearnedOverhead().after(excess=5_000, bias=3_000)
    assert learned.whole > learned.fixed > 0
    assert learned.held("estimate") == learned.whole
    assert learned.held("actual") == learned.fixed
