"""Issue 27's real-kernel sessions: prefix breaks land at turn starts, not inside tool loops.

Each shape runs twice in a real ``AmplifierSession`` (see ``tests/e2e/timing_rows.py``): in the
default configuration, and with the turn-start rule switched off (the module as it escalated
before: only when the view crossed its trigger, wherever that was).
"""

from __future__ import annotations

import pytest

from .e2e.timing_rows import SHAPES, Shape, run_shape


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
async def test_prefix_breaks_land_at_turn_starts_at_no_extra_cost(shape: Shape) -> None:
    before = await run_shape(shape, {"escalate_at_turn_start": False})
    after = await run_shape(shape, {})
    for run in (before, after):
        assert run.error is None and run.refusals == 0
        assert run.completed == shape.prompts
    assert before.breaks_in_loop >= 3, "the session compacts inside its loops without the rule"
    assert after.breaks >= 2
    assert after.turn_start_share >= 0.9, (after.breaks_at_turn_start, after.breaks_in_loop)
    assert after.compactions <= before.compactions + 1
    assert after.prefix_share >= before.prefix_share
    assert set(after.reasons) <= {"turn_start", "threshold", "over_budget"}
