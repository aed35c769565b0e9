"""A request's thresholds (pure core): the turn-start aim fits whole turns, never above the
target nor below the deepest share of it, and gives up where not one turn fits."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.planning._thresholds import DEEPEST_TARGET_SHARE, thresholds


@given(
    effective=st.integers(1_000, 400_000),
    threshold=st.floats(0.3, 1.0),
    target_share=st.floats(0.1, 0.9),
    growth=st.integers(1, 200_000),
    closing=st.integers(0, 20_000),
)
def test_the_turn_aim_leaves_room_for_whole_turns(
    effective: int, threshold: float, target_share: float, growth: int, closing: int
) -> None:
    """``growth`` is what the turn adds to its own requests; a whole turn (``cycle``) adds
    its closing answer and the next prompt as well."""
    cycle = growth + closing
    config = ContextConfig(compact_threshold=threshold, target_usage=target_share)
    limits = thresholds(config, effective, reserved=0)
    deepest = math.ceil(DEEPEST_TARGET_SHARE * limits.target)
    aim = limits.turn_aim(growth, cycle)
    if limits.trigger - growth < deepest:
        assert aim is None
        return
    assert aim is not None
    assert deepest <= aim <= max(limits.target, deepest)
    assert aim + growth <= limits.trigger  # at least the turn now starting fits
    further = max(0, math.ceil((limits.trigger - growth - limits.target) / cycle))
    if aim > deepest and aim < limits.target:
        # The turn now starting and a whole number of whole turns after it, and no more.
        assert aim + growth + further * cycle <= limits.trigger + 1
        assert aim + growth + (further + 1) * cycle > limits.trigger


@given(effective=st.integers(1_000, 400_000), reserved=st.integers(0, 5_000))
def test_the_quiet_figure_is_below_every_rule_it_stands_for(effective: int, reserved: int) -> None:
    cold = ContextConfig(cache_ttl_seconds=300)
    limits = thresholds(cold, effective, reserved)
    assert limits.quiet <= limits.quiet_warm <= limits.trigger
    assert limits.quiet <= limits.cold_floor
    assert limits.quiet_warm <= limits.limit  # the identity model: room is the budget
    warm = thresholds(ContextConfig(cache_ttl_seconds=0), effective, reserved)
    assert warm.quiet == warm.quiet_warm


def test_the_turn_aim_at_its_edges() -> None:
    # Exactly the deepest aim still leaves the turn room; one token more growth does not.
    limits = dataclasses.replace(thresholds(ContextConfig(), 10_000, 0), trigger=1000.0, target=800)
    assert math.ceil(DEEPEST_TARGET_SHARE * limits.target) == 400
    assert limits.turn_aim(600, 600) == 400
    assert limits.turn_aim(601, 601) is None
    # A one-token cycle under a fractional trigger: the 100 whole turns after this one fit
    # (899 + 1 + 100 <= 1000.5); aiming at the target, 900, the hundredth would not.
    limits = dataclasses.replace(limits, trigger=1000.5, target=900)
    assert limits.turn_aim(1, 1) == 899
