"""Tests for the real-usage token meter, driven through the host's real hook registry."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from typing import Any

import pytest
from amplifier_core.message_models import Usage
from amplifier_core.models import HookResult
from amplifier_core.testing import MockCoordinator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple._meter import (
    CALIBRATION_ALPHA,
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    METER_EVENT,
    METER_HOOK_NAME,
    METER_HOOK_PRIORITY,
    MeterStats,
    TokenMeter,
    choose_usage,
    parse_usage_reading,
)


def _mounted() -> tuple[TokenMeter, Any, Any]:
    """A meter registered on a real host registry; returns (meter, hooks, unregister)."""
    coordinator = MockCoordinator()
    meter = TokenMeter()
    unregister = coordinator.hooks.register(
        METER_EVENT, meter.on_llm_response, priority=METER_HOOK_PRIORITY, name=METER_HOOK_NAME
    )
    return meter, coordinator.hooks, unregister


async def _emit(hooks: Any, data: Any) -> Any:
    return await hooks.emit(METER_EVENT, data)


def test_constants() -> None:
    assert METER_HOOK_NAME == "context-simple-meter"
    assert METER_HOOK_PRIORITY == 50
    assert METER_EVENT == "llm:response"


# -- readings through the host -------------------------------------------------------


async def test_valid_usage_is_recorded() -> None:
    meter, hooks, _ = _mounted()
    assert meter.latest_reading is None
    assert meter.reading_count == 0
    result = await _emit(hooks, {"usage": {"input_tokens": 1234, "output_tokens": 50}})
    assert result.action == "continue"
    assert meter.latest_reading == 1234
    assert meter.reading_count == 1
    await _emit(hooks, {"usage": {"input_tokens": 2000}})
    assert meter.latest_reading == 2000
    assert meter.reading_count == 2


async def test_cache_write_added_cache_read_not() -> None:
    meter, hooks, _ = _mounted()
    usage = {"input_tokens": 900, "cache_read_tokens": 800, "cache_write_tokens": 300}
    await _emit(hooks, {"usage": usage})
    assert meter.latest_reading == 1200


async def test_first_cache_write_with_tiny_input() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 3, "cache_write_tokens": 40_000}})
    assert meter.latest_reading == 40_003


async def test_cache_write_none_counts_as_zero() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 10, "cache_write_tokens": None}})
    assert meter.latest_reading == 10


async def test_usage_as_json_string() -> None:
    meter, hooks, _ = _mounted()
    text = json.dumps({"input_tokens": 700, "cache_write_tokens": 20, "cache_read_tokens": 500})
    await _emit(hooks, {"usage": text})
    assert meter.latest_reading == 720


async def test_usage_as_str_of_dict() -> None:
    meter, hooks, _ = _mounted()
    text = str({"input_tokens": 640, "cache_write_tokens": None, "cache_read_tokens": 600})
    assert "None" in text  # a Python rendering, not JSON
    await _emit(hooks, {"usage": text})
    assert meter.latest_reading == 640


async def test_usage_as_str_of_dict_with_non_literal_values() -> None:
    meter, hooks, _ = _mounted()
    text = str({"input_tokens": 55, "cache_write_tokens": 5, "cost_usd": Decimal("0.1")})
    await _emit(hooks, {"usage": text})
    assert meter.latest_reading == 60


async def test_usage_model_object_arrives_as_its_str() -> None:
    """The host str()s a pydantic Usage; the meter reads its name=value rendering."""
    meter, hooks, _ = _mounted()
    usage = Usage(
        input_tokens=5000,
        output_tokens=10,
        total_tokens=5010,
        cache_read_tokens=4000,
        cache_write_tokens=250,
        cost_usd=Decimal("0.02"),
    )
    seen: list[Any] = []

    async def spy(event: str, data: Any) -> HookResult:
        seen.append(data)
        return HookResult(action="continue")

    hooks.register(METER_EVENT, spy, priority=99, name="spy")
    await _emit(hooks, {"usage": usage})
    assert isinstance(seen[0]["usage"], str)
    assert meter.latest_reading == 5250


async def test_usage_object_passed_directly() -> None:
    meter = TokenMeter()
    usage = Usage(input_tokens=77, output_tokens=1, total_tokens=78, cache_write_tokens=3)
    result = await meter.on_llm_response(METER_EVENT, {"usage": usage})
    assert isinstance(result, HookResult)
    assert result.action == "continue"
    assert meter.latest_reading == 80


async def test_wire_key_aliases() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"prompt_tokens": 400, "cache_creation_tokens": 40}})
    assert meter.latest_reading == 440
    await _emit(hooks, {"usage": {"input_tokens": 100, "cache_creation_input_tokens": 9}})
    assert meter.latest_reading == 109


async def test_canonical_keys_win_over_aliases() -> None:
    meter, hooks, _ = _mounted()
    usage = {
        "input_tokens": 100,
        "prompt_tokens": 999,
        "cache_write_tokens": 10,
        "cache_creation_input_tokens": 10,
    }
    await _emit(hooks, {"usage": usage})
    assert meter.latest_reading == 110  # no double count of the cache write


async def test_raw_anthropic_usage_rebuilds_gross_input() -> None:
    meter, hooks, _ = _mounted()
    raw = {
        "input_tokens": 12,
        "cache_read_input_tokens": 90_000,
        "cache_creation_input_tokens": 500,
        "output_tokens": 80,
    }
    await _emit(hooks, {"usage": raw})
    assert meter.latest_reading == 90_512


async def test_normalised_payload_with_raw_extras_not_double_counted() -> None:
    meter, hooks, _ = _mounted()
    usage = {
        "input_tokens": 90_012,
        "cache_read_tokens": 90_000,
        "cache_write_tokens": 500,
        "cache_read_input_tokens": 90_000,
        "cache_creation_input_tokens": 500,
    }
    await _emit(hooks, {"usage": usage})
    assert meter.latest_reading == 90_512


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -1},
        {"input_tokens": True},
        {"input_tokens": False},
        {"input_tokens": 12.0},
        {"input_tokens": "12"},
        {"input_tokens": None},
        {"output_tokens": 12},
        {},
        {"input_tokens": 10, "cache_write_tokens": -5},
        {"input_tokens": 10, "cache_write_tokens": True},
        {"input_tokens": 10, "cache_write_tokens": 1.5},
        {"input_tokens": 10, "cache_write_tokens": "3"},
        {"input_tokens": 0, "cache_write_tokens": 0},
        {"input_tokens": 2**31},
        {"input_tokens": 2**80},  # the host turns this into a float
        {"input_tokens": 10, "cache_read_input_tokens": -3},
        None,
        5,
        5.5,
        True,
        [1, 2],
        "",
        "not usage at all",
        "{'input_tokens': 10",
        "Usage(input_tokens=10",
        "input_tokens=10 cache_write_tokens=5 input_tokens=10",
        "input_tokens=10.5",
        "{'details': {'input_tokens': 1}, 'input_tokens': 10, 'cost': Decimal('1')}",
        json.dumps({"input_tokens": -4}),
        json.dumps([1, 2, 3]),
        "x" * 100_000,
    ],
)
async def test_malformed_usage_leaves_reading_unchanged(usage: Any) -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 321}})
    result = await _emit(hooks, {"usage": usage})
    assert result.action == "continue"
    assert meter.latest_reading == 321
    assert meter.reading_count == 1


async def test_missing_usage_key_is_ignored() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"provider": "x", "input_tokens": 5})
    assert meter.latest_reading is None
    assert meter.reading_count == 0


@pytest.mark.parametrize("data", ["usage", None, 7, [{"usage": {"input_tokens": 3}}]])
async def test_data_not_a_dict_is_ignored(data: Any) -> None:
    meter, hooks, _ = _mounted()
    result = await _emit(hooks, data)
    assert result.action == "continue"
    assert meter.latest_reading is None
    assert (await meter.on_llm_response(METER_EVENT, data)) == HookResult(action="continue")
    assert meter.reading_count == 0


async def test_other_event_names_are_ignored() -> None:
    meter = TokenMeter()
    await meter.on_llm_response("llm:request", {"usage": {"input_tokens": 5}})
    assert meter.latest_reading is None


async def test_hostile_usage_object_does_not_raise() -> None:
    class Exploding:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    class Weird(dict[str, Any]):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no")

    meter = TokenMeter()
    continue_ = HookResult(action="continue")
    assert await meter.on_llm_response(METER_EVENT, {"usage": Exploding()}) == continue_
    assert await meter.on_llm_response(METER_EVENT, Weird()) == continue_
    assert meter.latest_reading is None


_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["input_tokens", "cache_write_tokens", "{", "}", "=", "None", "'"])
)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["input_tokens", "cache_write_tokens", "cache_read_input_tokens", "usage", "x"]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=_json_value
    | st.dictionaries(st.just("usage"), _json_value | _json_value.map(str), min_size=1)
    | st.dictionaries(st.just("usage"), _json_value.map(json.dumps), min_size=1)
)
def test_handler_never_raises_and_always_continues(payload: Any) -> None:
    async def run() -> None:
        meter, hooks, _ = _mounted()
        result = await _emit(hooks, payload)
        assert result.action == "continue"
        direct = await meter.on_llm_response(METER_EVENT, payload)
        assert isinstance(direct, HookResult)
        assert direct.action == "continue"
        latest = meter.latest_reading
        assert latest is None or (isinstance(latest, int) and latest > 0)

    asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(garbage=st.text(max_size=200) | st.binary(max_size=50) | st.integers() | st.floats())
def test_parse_usage_reading_is_total(garbage: Any) -> None:
    reading = parse_usage_reading(garbage)
    assert reading is None or reading > 0


# -- foreground claim ----------------------------------------------------------------


async def test_foreground_claim_wins_over_generic_events() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 100}})
    record = meter.claim_foreground_usage()
    assert meter.foreground_claimed
    assert record(input_tokens=5000, cache_write_tokens=200) is True
    assert meter.latest_reading == 5200
    await _emit(hooks, {"usage": {"input_tokens": 7}})  # e.g. a background summariser
    assert meter.latest_reading == 5200
    assert meter.reading_count == 2
    assert record(input_tokens=6000) is True
    assert meter.latest_reading == 6000
    assert record(input_tokens=6001, cache_write_tokens=None) is True
    assert meter.latest_reading == 6001


@pytest.mark.parametrize(
    ("input_tokens", "cache_write_tokens"),
    [
        (-1, 0),
        (True, 0),
        (10.0, 0),
        ("10", 0),
        (10, -1),
        (10, False),
        (10, 2.0),
        (0, 0),
        (2**31, 0),
    ],
)
def test_foreground_recorder_rejects_invalid(input_tokens: Any, cache_write_tokens: Any) -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    assert record(input_tokens=10) is True
    assert record(input_tokens=input_tokens, cache_write_tokens=cache_write_tokens) is False
    assert meter.latest_reading == 10
    assert meter.reading_count == 1


# -- calibration ---------------------------------------------------------------------


async def test_calibration_pairs_estimate_with_next_reading() -> None:
    meter, hooks, _ = _mounted()
    assert meter.calibration_ratio is None
    assert meter.calibrated(1000) == 1000
    meter.note_request_estimate(1000)
    await _emit(hooks, {"usage": {"input_tokens": 2000}})
    assert meter.calibration_ratio == pytest.approx(2.0)
    assert meter.calibrated(1000) == 2000
    meter.note_request_estimate(1000)
    await _emit(hooks, {"usage": {"input_tokens": 1000}})
    expected = CALIBRATION_ALPHA * 1.0 + (1 - CALIBRATION_ALPHA) * 2.0
    assert meter.calibration_ratio == pytest.approx(expected)
    assert meter.calibrated(333) == math.ceil(round(333 * expected, 6))


async def test_reading_without_pending_estimate_does_not_calibrate() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 2000}})
    assert meter.calibration_ratio is None
    meter.note_request_estimate(1000)
    await _emit(hooks, {"usage": {"input_tokens": 1500}})
    assert meter.calibration_ratio == pytest.approx(1.5)
    await _emit(hooks, {"usage": {"input_tokens": 9000}})  # estimate already consumed
    assert meter.calibration_ratio == pytest.approx(1.5)
    assert meter.latest_reading == 9000


async def test_zero_estimate_is_not_paired() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(0)
    await _emit(hooks, {"usage": {"input_tokens": 2000}})
    assert meter.calibration_ratio is None
    assert meter.latest_reading == 2000


async def test_malformed_reading_keeps_estimate_pending() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(100)
    await _emit(hooks, {"usage": {"input_tokens": -5}})
    assert meter.calibration_ratio is None
    await _emit(hooks, {"usage": {"input_tokens": 150}})
    assert meter.calibration_ratio == pytest.approx(1.5)


def test_latest_estimate_replaces_unpaired_one() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(10)
    meter.note_request_estimate(1000)
    assert record(input_tokens=1200)
    assert meter.calibration_ratio == pytest.approx(1.2)


def test_calibration_is_clamped() -> None:
    high = TokenMeter()
    record_high = high.claim_foreground_usage()
    high.note_request_estimate(100)
    assert record_high(input_tokens=100_000)
    assert high.calibration_ratio == CALIBRATION_MAX
    assert high.calibrated(1000) == 4000

    low = TokenMeter()
    record_low = low.claim_foreground_usage()
    low.note_request_estimate(100_000)
    assert record_low(input_tokens=1)
    assert low.calibration_ratio == CALIBRATION_MIN
    assert low.calibrated(1000) == 250

    # from the top clamp, repeated bottom-clamped samples approach but never pass it
    for _ in range(60):
        high.note_request_estimate(100_000)
        assert record_high(input_tokens=1)
        assert high.calibration_ratio is not None
        assert CALIBRATION_MIN <= high.calibration_ratio <= CALIBRATION_MAX
    assert high.calibration_ratio == pytest.approx(CALIBRATION_MIN)


def test_calibrated_rounds_up_without_float_noise() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(10)
    assert record(input_tokens=11)  # ratio 1.1, and 100 * 1.1 == 110.00000000000001
    assert meter.calibrated(100) == 110
    assert meter.calibrated(101) == 112  # 111.1 rounds up
    assert meter.calibrated(0) == 0


@pytest.mark.parametrize("bad", [-1, True, 1.5, "10", None])
def test_estimate_inputs_are_validated(bad: Any) -> None:
    meter = TokenMeter()
    with pytest.raises(ValueError, match="estimate"):
        meter.note_request_estimate(bad)
    with pytest.raises(ValueError, match="estimate"):
        meter.calibrated(bad)


# -- snapshot / restore / reset ------------------------------------------------------


async def test_snapshot_restore_is_exact() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(500)
    await _emit(hooks, {"usage": {"input_tokens": 800}})
    meter.note_request_estimate(900)  # left pending on purpose
    before = meter.snapshot()
    fields_before = (
        meter.latest_reading,
        meter.reading_count,
        meter.calibration_ratio,
        meter.foreground_claimed,
    )

    record = meter.claim_foreground_usage()
    assert record(input_tokens=1800)
    meter.note_request_estimate(3)
    assert meter.snapshot() != before

    meter.restore(before)
    assert meter.snapshot() == before
    assert (
        meter.latest_reading,
        meter.reading_count,
        meter.calibration_ratio,
        meter.foreground_claimed,
    ) == fields_before
    # the pending estimate came back too: the next reading pairs with 900
    await _emit(hooks, {"usage": {"input_tokens": 900}})
    expected = CALIBRATION_ALPHA * 1.0 + (1 - CALIBRATION_ALPHA) * 1.6
    assert meter.calibration_ratio == pytest.approx(expected)


def test_snapshot_is_immutable_and_restore_rejects_foreign_values() -> None:
    meter = TokenMeter()
    snap = meter.snapshot()
    with pytest.raises(AttributeError):
        snap.latest_reading = 5  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="snapshot"):
        meter.restore({"latest_reading": 5})


async def test_recorder_reclaims_after_restore_to_unclaimed_state() -> None:
    meter, hooks, _ = _mounted()
    unclaimed = meter.snapshot()
    record = meter.claim_foreground_usage()
    meter.restore(unclaimed)
    assert not meter.foreground_claimed
    await _emit(hooks, {"usage": {"input_tokens": 40}})
    assert meter.latest_reading == 40
    assert record(input_tokens=50)
    assert meter.foreground_claimed
    await _emit(hooks, {"usage": {"input_tokens": 60}})
    assert meter.latest_reading == 50


async def test_reset_clears_readings_and_calibration_but_keeps_claim() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(10)
    await _emit(hooks, {"usage": {"input_tokens": 20}})
    meter.note_request_estimate(10)
    meter.reset()
    assert meter.latest_reading is None
    assert meter.reading_count == 0
    assert meter.calibration_ratio is None
    await _emit(hooks, {"usage": {"input_tokens": 30}})
    assert meter.calibration_ratio is None  # the pending estimate went with the reset
    assert meter.latest_reading == 30

    meter.claim_foreground_usage()
    meter.reset()
    assert meter.foreground_claimed
    await _emit(hooks, {"usage": {"input_tokens": 30}})
    assert meter.latest_reading is None


# -- choose_usage / MeterStats -------------------------------------------------------


def test_choose_usage_actual_falls_back_until_first_reading() -> None:
    meter = TokenMeter()
    stats = choose_usage(
        mode="actual", estimated=400, meter=meter, budget=1000, view_has_images=True
    )
    assert stats == MeterStats(
        mode="actual",
        source="estimate",
        used=400,
        estimated=400,
        measured=None,
        budget=1000,
        ratio=0.4,
        images_measured=False,
        calibration_ratio=None,
    )


async def test_choose_usage_actual_uses_reading() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(400)
    await _emit(hooks, {"usage": {"input_tokens": 700, "cache_write_tokens": 100}})
    stats = choose_usage(
        mode="actual", estimated=450, meter=meter, budget=1000, view_has_images=True
    )
    assert stats.source == "actual"
    # The view grew since the reading (450 estimated vs 400 then): the calibrated estimate
    # of the current view (450 * 2.0) beats the stale reading.
    assert stats.used == 900
    assert stats.measured == 800
    assert stats.estimated == 450
    assert stats.ratio == pytest.approx(0.9)
    assert stats.images_measured is True
    assert stats.calibration_ratio == pytest.approx(2.0)
    shrunk = choose_usage(
        mode="actual", estimated=300, meter=meter, budget=1000, view_has_images=False
    )
    assert shrunk.used == 800, "a reading above the calibrated estimate is kept"
    no_images = choose_usage(
        mode="actual", estimated=450, meter=meter, budget=1000, view_has_images=False
    )
    assert no_images.images_measured is False


async def test_choose_usage_estimate_mode_reports_but_ignores_reading() -> None:
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 900}})
    stats = choose_usage(
        mode="estimate", estimated=300, meter=meter, budget=600, view_has_images=False
    )
    assert stats.mode == "estimate"
    assert stats.source == "estimate"
    assert stats.used == 300
    assert stats.measured == 900
    assert stats.ratio == pytest.approx(0.5)


async def test_stats_as_dict_is_json_safe_and_complete() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(100)
    await _emit(hooks, {"usage": {"input_tokens": 150}})
    stats = choose_usage(
        mode="actual", estimated=120, meter=meter, budget=1000, view_has_images=False
    )
    payload = stats.as_dict()
    assert json.loads(json.dumps(payload)) == payload
    assert payload == {
        "mode": "actual",
        "source": "actual",
        "used": 180,
        "estimated": 120,
        "measured": 150,
        "budget": 1000,
        "ratio": 0.18,
        "images_measured": False,
        "calibration_ratio": 1.5,
    }


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"mode": "auto"}, "mode"),
        ({"estimated": -1}, "estimated"),
        ({"estimated": True}, "estimated"),
        ({"budget": 0}, "budget"),
        ({"budget": -5}, "budget"),
        ({"budget": 10.0}, "budget"),
    ],
)
def test_choose_usage_rejects_bad_arguments(kwargs: dict[str, Any], word: str) -> None:
    args: dict[str, Any] = {
        "mode": "estimate",
        "estimated": 10,
        "meter": TokenMeter(),
        "budget": 100,
        "view_has_images": False,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=word):
        choose_usage(**args)


# -- registration lifecycle ----------------------------------------------------------


async def test_unregister_stops_readings() -> None:
    meter, hooks, unregister = _mounted()
    assert callable(unregister)
    assert METER_HOOK_NAME in hooks.list_handlers(METER_EVENT)[METER_EVENT]
    await _emit(hooks, {"usage": {"input_tokens": 10}})
    assert meter.latest_reading == 10
    assert unregister() is None
    assert unregister() is None  # idempotent in amplifier-core 2.0.2
    assert METER_HOOK_NAME not in hooks.list_handlers(METER_EVENT).get(METER_EVENT, [])
    await _emit(hooks, {"usage": {"input_tokens": 99}})
    assert meter.latest_reading == 10
    assert meter.reading_count == 1


async def test_plain_dict_result_when_core_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("amplifier_core"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    meter = TokenMeter()
    result = await meter.on_llm_response(METER_EVENT, {"usage": {"input_tokens": 8}})
    assert result == {"action": "continue"}
    assert meter.latest_reading == 8
