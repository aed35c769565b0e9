"""The timing rules at their exact boundaries (planning/_timing.py): a view at the trigger
escalates, one a turn's growth brings exactly to it does not, a cold cache counts from its
floor on, and a turn-start escalation is worth its edit when the turn fits exactly."""

from __future__ import annotations

from typing import Any

import pytest

from amplifier_module_context_simple.planning._config import ContextConfig
from amplifier_module_context_simple.planning._thresholds import Thresholds, thresholds
from amplifier_module_context_simple.planning._timing import (
    Moment,
    Timing,
    escalation_timing,
    leaves_room_for_turn,
    moment_of,
)

from ..history.test_turn_rule import build
from ..views.test_map_making import indexed

EFFECTIVE = 100_000


def _limits(config: ContextConfig) -> Thresholds:
    limits = thresholds(config, EFFECTIVE, 0)
    assert float(limits.trigger).is_integer() and float(limits.cold_floor).is_integer()
    return limits


def _moment(history: list[dict[str, Any]], limits: Thresholds) -> Moment:
    return moment_of(indexed(history), limits.usable)


def _timing(
    config: ContextConfig, moment: Moment, limits: Thresholds, used: int, grows: int | None = None
) -> Timing:
    return escalation_timing(
        config, moment, limits, used=used, over_limit=False,
        to_real=(lambda g: g) if grows is None else (lambda g: grows if g else 0),
    )  # fmt: skip


def test_a_view_at_the_trigger_escalates_and_one_below_it_does_not() -> None:
    config = ContextConfig(cache_ttl_seconds=0)
    limits = _limits(config)
    moment = _moment(build("H A[c0] T"), limits)  # inside a tool loop: no turn starts
    trigger = int(limits.trigger)
    assert _timing(config, moment, limits, trigger).reason == "threshold"
    assert _timing(config, moment, limits, trigger - 1).reason is None


def test_a_turn_whose_growth_reaches_the_trigger_exactly_still_fits() -> None:
    config = ContextConfig(cache_ttl_seconds=0)
    limits = _limits(config)
    moment = _moment(build("H A[c0] T A H"), limits)
    growth = moment.turn_growth
    assert moment.turn_start and growth > 0
    trigger = int(limits.trigger)
    assert _timing(config, moment, limits, trigger - growth).reason is None
    assert _timing(config, moment, limits, trigger - growth + 1).reason == "turn_start"


def test_a_turn_that_grows_by_a_single_token_is_aimed_for_all_the_same() -> None:
    config = ContextConfig(cache_ttl_seconds=0)
    limits = _limits(config)
    moment = _moment(build("H A[c0] T A H"), limits)
    timing = _timing(config, moment, limits, int(limits.trigger), grows=1)
    assert (timing.reason, timing.for_turn) == ("threshold", True)


@pytest.mark.parametrize(("below", "reason"), [(0, "cold_cache"), (1, None)])
def test_a_cold_cache_escalates_from_its_floor_on(below: int, reason: str | None) -> None:
    config = ContextConfig(cache_ttl_seconds=300)
    limits = _limits(config)
    history = build("H A[c0] T")
    history[1]["metadata"] = {"timestamp": "2026-01-01T10:00:00Z"}
    history[2]["metadata"] = {"timestamp": "2026-01-01T10:06:00Z"}
    moment = _moment(history, limits)
    assert _timing(config, moment, limits, int(limits.cold_floor) - below).reason == reason


def test_a_turn_start_escalation_that_leaves_exactly_the_turn_s_room_is_worth_it() -> None:
    config = ContextConfig(cache_ttl_seconds=0)
    limits = _limits(config)
    moment = _moment(build("H A[c0] T A H"), limits)
    timing = Timing("turn_start", limits.target, moment, limits, for_turn=True)
    room = limits.trigger_estimate - moment.turn_growth
    assert leaves_room_for_turn(timing, room)
    assert not leaves_room_for_turn(timing, room + 1)
    assert leaves_room_for_turn(Timing("threshold", limits.target, moment, limits), room + 1)
