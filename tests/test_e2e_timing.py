"""Issues 27 and 35's real-kernel sessions: prefix breaks land at turn starts, at no extra cost.

Each session runs twice in a real ``AmplifierSession`` (see ``tests/e2e/timing_rows.py``): in
the default configuration, and with the turn-start rule switched off (the module escalating
only when the view crosses its trigger, wherever that is).
"""

from __future__ import annotations

import pytest

from .e2e.timing_rows import OUTGROWING, SESSIONS, SHAPES, Shape, TimingResult, run_both


def _completed(shape: Shape, *runs: TimingResult) -> None:
    for run in runs:
        assert run.error is None and run.refusals == 0
        assert run.completed == shape.prompts


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
async def test_prefix_breaks_land_at_turn_starts_at_no_extra_cost(shape: Shape) -> None:
    after, before = await run_both(shape)
    _completed(shape, before, after)
    assert before.breaks_in_loop >= 3, "the session compacts inside its loops without the rule"
    assert after.breaks >= 2
    assert after.turn_start_share >= 0.9, (after.breaks_at_turn_start, after.breaks_in_loop)
    assert after.compactions <= before.compactions + 1
    assert after.prefix_share >= before.prefix_share
    assert set(after.reasons) <= {"turn_start", "threshold", "over_budget"}


@pytest.mark.parametrize("shape", SESSIONS, ids=lambda s: s.id)
async def test_the_turn_start_rule_pays_for_itself(shape: Shape) -> None:
    on, off = await run_both(shape)
    _completed(shape, on, off)
    assert off.breaks_in_loop >= 0.9 * off.breaks, "without the rule the breaks are in loops"
    assert on.turn_start_share >= 0.9, (on.breaks_at_turn_start, on.breaks_in_loop)
    assert on.compactions <= off.compactions + 1, (on.compactions, off.compactions)
    assert on.prefix_share >= off.prefix_share - 0.01, (on.prefix_share, off.prefix_share)


async def test_the_rule_does_not_fire_where_a_turn_outgrows_the_room() -> None:
    on, off = await run_both(OUTGROWING)
    _completed(OUTGROWING, on, off)
    assert off.breaks_in_loop >= 10, "every few turns escalate inside their loop"
    assert "turn_start" not in on.reasons, on.reasons
    assert on.compactions == off.compactions
    assert on.prefix_share == off.prefix_share
