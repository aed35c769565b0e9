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

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.readings._meter import (
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    FIT_PAIRS,
    IDENTITY,
    METER_EVENT,
    METER_HOOK_NAME,
    METER_HOOK_PRIORITY,
    SizeModel,
    TokenMeter,
    fit_size_model,
    parse_usage_reading,
)
from amplifier_module_context_simple.readings._meter_stats import MeterStats, choose_usage


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
        {"input_tokens": 2**53 + 1},
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
        (2**53 + 1, 0),
        (10, 2**53 + 1),
    ],
)
def test_foreground_recorder_rejects_invalid(input_tokens: Any, cache_write_tokens: Any) -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    assert record(input_tokens=10) is True
    assert record(input_tokens=input_tokens, cache_write_tokens=cache_write_tokens) is False
    assert meter.latest_reading == 10
    assert meter.reading_count == 1


# -- pairing and the size model ------------------------------------------------------


async def test_first_reading_after_a_view_answers_it_side_readings_do_not() -> None:
    meter, hooks, _ = _mounted()
    assert meter.calibration_ratio is None
    assert meter.size_model == IDENTITY
    meter.note_request_estimate(1_000)
    await _emit(hooks, {"usage": {"input_tokens": 4_000}})
    assert meter.answered_reading == 4_000
    assert meter.size_model == SizeModel(3_000, 1.0)
    assert meter.figure(1_200) == 4_200, "the reading plus the modelled growth since"
    await _emit(hooks, {"usage": {"input_tokens": 50}})  # a summariser's side call
    assert meter.latest_reading == 50, "recorded and reported"
    assert meter.reading_count == 2
    assert meter.answered_reading == 4_000, "but it answers no view"
    assert meter.size_model == SizeModel(3_000, 1.0)
    assert meter.pair_count == 1


async def test_a_reading_before_any_view_answers_nothing() -> None:
    """A reading answers a view that went out, never one that did not: before the first view
    (of a session, or after a resume) it is some other call's (issue 28)."""
    meter, hooks, _ = _mounted()
    await _emit(hooks, {"usage": {"input_tokens": 5_000}})
    assert meter.latest_reading == 5_000 and meter.reading_count == 1, "recorded"
    assert meter.figure(1_000) is None
    assert meter.size_model_for(1_000) == IDENTITY
    meter.note_request_estimate(1_000)
    await _emit(hooks, {"usage": {"input_tokens": 1_200}})
    assert meter.figure(1_000) == 1_200
    meter.reset()  # a resume
    await _emit(hooks, {"usage": {"input_tokens": 900}})
    assert meter.figure(161_512) is None and meter.pair_count == 0


async def test_readings_after_an_answered_view_do_not_anchor_as_pre_view_readings() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(100)
    await _emit(hooks, {"usage": {"input_tokens": 300}})
    await _emit(hooks, {"usage": {"input_tokens": 9_000}})
    assert meter.figure(100) == 300


def test_one_pair_below_the_estimate_means_no_overhead_and_a_scaled_k() -> None:
    assert fit_size_model([(1_000, 500)]) == SizeModel(0, 0.5)
    assert fit_size_model([(1_000, 100)]) == SizeModel(0, CALIBRATION_MIN), "k is bounded"
    assert fit_size_model([(1_000, 1_000)]) == SizeModel(0, 1.0)
    # An exact reading is one pair's guess, no slope: later readings below their views may
    # still teach a slope under one.
    exact = fit_size_model([(1_000, 1_000)])
    assert not exact.sloped
    assert fit_size_model([(1_000, 800), (1_050, 840)], prior=exact).k == 0.8
    assert fit_size_model([(1_000, 1_700)]) == SizeModel(700, 1.0)
    assert fit_size_model([]) == IDENTITY
    assert fit_size_model([(0, 500)]) == IDENTITY, "an empty view says nothing"


def test_a_fixed_overhead_is_not_mistaken_for_a_ratio() -> None:
    """30,000 tokens of tool definitions over a 1,000-token history (the issue's example)."""
    model = fit_size_model([(1_000, 31_000), (1_500, 31_500)])
    assert model == SizeModel(30_000, 1.0)
    assert model.to_real(1_500) - model.to_real(1_000) == 500, "removing 500 frees 500"
    assert model.to_estimate(20_000) == 0, "no view fits under the overhead"


def test_two_pairs_recover_bias_and_overhead() -> None:
    model = fit_size_model([(10_000, 25_000), (12_000, 29_000)])
    assert model == SizeModel(5_000, 2.0)
    assert model.to_real(6_000) == 17_000
    assert model.to_estimate(17_000) == 6_000


def test_close_estimates_fall_back_to_the_one_pair_rule_on_the_newest() -> None:
    assert fit_size_model([(10_000, 10_000), (10_100, 14_000)]) == SizeModel(3_900, 1.0)


def test_estimates_a_tenth_apart_are_enough_to_fit_a_slope() -> None:
    # The spread rule is "at least a tenth of the largest": exactly a tenth fits a slope.
    model = fit_size_model([(900, 1_800), (1_000, 2_000)])
    assert (model.k, model.sloped) == (2.0, True)
    closer = fit_size_model([(901, 1_802), (1_000, 2_000)])
    assert (closer.k, closer.sloped) == (1.0, False)


def test_a_view_estimated_at_one_token_is_a_pair_like_any_other() -> None:
    assert fit_size_model([(1, 40)]) == SizeModel(39, 1.0)


def test_a_run_of_similar_views_keeps_the_slope_already_identified() -> None:
    sloped = fit_size_model([(5_000, 10_000), (10_000, 20_000)])
    assert sloped.k == 2.0
    similar = [(12_000, 24_000), (12_200, 24_400), (12_400, 24_800)]  # spread under 10%
    assert fit_size_model(similar).k == 1.0, "alone they cannot identify a slope"
    kept = fit_size_model(similar, prior=sloped)
    assert (kept.k, kept.overhead) == (2.0, 0)
    assert kept.to_real(12_400) >= 24_800, "never below the newest reading"
    # Kept, the slope is still a fitted one: the next run of similar views keeps it too.
    assert kept.sloped
    assert fit_size_model(similar[1:], prior=kept).k == 2.0
    # With an overhead identified beside the slope, the kept model is anchored on the newest
    # pair: its overhead is what that reading shows beyond the slope.
    steep = fit_size_model([(5_000, 10_300), (10_000, 20_300)])
    assert (steep.k, steep.overhead) == (2.0, 300)
    anchored = fit_size_model([(12_000, 24_300), (12_200, 24_900)], prior=steep)
    assert (anchored.k, anchored.overhead) == (2.0, 500)
    assert anchored.to_real(12_200) == 24_900
    guess = fit_size_model([(1_000, 1_700)])
    assert fit_size_model(similar, prior=guess).k == 1.0, "a one-pair guess is no slope"


def test_the_fit_is_bounded_and_anchored_on_the_newest_pair() -> None:
    steep = fit_size_model([(1_000, 1_000), (2_000, 100_000)])
    assert steep.k == CALIBRATION_MAX
    assert steep.to_real(2_000) >= 100_000
    falling = fit_size_model([(1_000, 9_000), (2_000, 1_000)])
    assert falling.k == CALIBRATION_MIN
    assert falling.overhead == 500
    assert falling.to_real(2_000) == 1_000


def test_only_recent_pairs_count() -> None:
    old = [(e, 4 * e) for e in range(1_000, 1_000 + 100 * FIT_PAIRS, 100)]
    new = [(e, e + 2_000) for e in range(5_000, 5_000 + 1_000 * FIT_PAIRS, 1_000)]
    assert fit_size_model([*old, *new]) == SizeModel(2_000, 1.0)


_pairs = st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 10**8)), min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(pairs=_pairs)
def test_fit_invariants(pairs: list[tuple[int, int]]) -> None:
    model = fit_size_model(pairs)
    assert model.overhead >= 0
    assert CALIBRATION_MIN <= model.k <= CALIBRATION_MAX
    informative = [(e, r) for e, r in pairs if e > 0]
    if informative:
        estimate, reading = informative[-1]
        assert model.to_real(estimate) >= reading, "never below the newest reading"
    else:
        assert model == IDENTITY


@settings(max_examples=300, deadline=None)
@given(
    tools=st.integers(0, 50_000),
    requests=st.lists(
        st.tuples(st.integers(1_000, 200_000), st.integers(0, 20_000)), min_size=2, max_size=20
    ),
)
def test_injection_noise_never_teaches_a_slope_below_one(
    tools: int, requests: list[tuple[int, int]]
) -> None:
    """An exact estimator whose requests carry the tools and a hook injection that moves
    between requests (a session-start reminder that shrinks, one that comes and goes): the
    readings above what the requests carried are overhead, never evidence that the estimator
    over-counts, so growth is never modelled below its estimate (issue 28)."""
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    for estimate, injection in requests:
        meter.note_request_estimate(estimate, accounted=estimate + tools)
        assert record(input_tokens=estimate + tools + injection)
        assert meter.size_model.k >= 1, (estimate, injection)
        assert meter.figure(estimate + 50_000) >= estimate + tools + 50_000


@settings(max_examples=200, deadline=None)
@given(
    ratio=st.floats(CALIBRATION_MIN, 0.99),
    tools=st.integers(0, 50_000),
    estimates=st.lists(st.integers(1_000, 200_000), min_size=2, max_size=FIT_PAIRS, unique=True),
)
def test_readings_below_what_was_carried_still_teach_a_slope_below_one(
    ratio: float, tools: int, estimates: list[int]
) -> None:
    """An estimator that over-counts, readings that are the tools plus the scaled view: each
    is below what its request carried, so the views explain the slope and it is learned."""
    pairs = [(e, tools + round(ratio * e)) for e in estimates]
    carried = [e + tools for e in estimates]
    assert fit_size_model(pairs, carried=carried) == fit_size_model(pairs)


def test_what_the_requests_carried_lowers_no_slope_of_one_or_more() -> None:
    # Cut to what their requests carried, these readings would fit a steeper slope; that cut
    # only ever raises a slope below 1 (a shrinking reminder is no evidence of over-counting).
    for slope in (1.0, 1.2):
        pairs = [(1_000, round(1_000 * slope) + 300), (2_000, round(2_000 * slope) + 300)]
        carried = [1_000, pairs[1][1]]
        assert fit_size_model(pairs, carried=carried).k == pytest.approx(slope)


def test_carried_figures_must_match_the_pairs() -> None:
    with pytest.raises(ValueError, match="carried has 1 entries for 2 pairs"):
        fit_size_model([(1_000, 1_200), (2_000, 2_200)], carried=[1_000])


@settings(max_examples=200, deadline=None)
@given(
    ratio=st.floats(CALIBRATION_MIN, CALIBRATION_MAX),
    overhead=st.integers(0, 100_000),
    estimates=st.lists(st.integers(1_000, 200_000), min_size=2, max_size=FIT_PAIRS, unique=True),
)
def test_a_linear_provider_is_recovered(ratio: float, overhead: int, estimates: list[int]) -> None:
    if max(estimates) - min(estimates) < 0.10 * max(estimates):
        estimates = [*estimates, max(estimates) * 2]
    pairs = [(e, overhead + round(ratio * e)) for e in estimates]
    model = fit_size_model(pairs)
    # Readings are whole tokens, so the slope is only as exact as that rounding allows.
    slope_error = 2 / (max(estimates) - min(estimates))
    for estimate in (0, 500, *estimates, 300_000):
        true = overhead + ratio * estimate
        # (a clamped overhead can add the slope's error over the newest estimate, too)
        assert abs(model.to_real(estimate) - true) <= 3 + slope_error * (
            abs(estimate - estimates[-1]) + estimates[-1]
        )


def test_one_token_above_the_overhead_is_room_for_a_view() -> None:
    assert SizeModel(100, 1.0).to_estimate(101) == 1
    assert SizeModel(100, 0.5).to_estimate(101) == 2
    assert SizeModel(100, 0.5).to_estimate(100) == 0


def test_size_model_identity_and_validation() -> None:
    assert IDENTITY.identity
    assert IDENTITY.to_real(12_345) == 12_345
    assert IDENTITY.to_estimate(12_345) == 12_345
    assert IDENTITY.to_real(10**30) == 10**30, "exact for any int"
    assert SizeModel(0, 1.1).to_real(100) == 110, "no float noise"
    assert SizeModel(0, 1.1).to_real(101) == 112, "rounded up"
    for bad in (
        {"overhead": -1},
        {"overhead": True},
        {"overhead": 1.5},
        {"k": 0.0},
        {"k": -1.0},
        {"k": math.inf},
        {"k": math.nan},
        {"k": True},
    ):
        with pytest.raises(ValueError, match="SizeModel"):
            SizeModel(**bad)  # type: ignore[arg-type]
    for bad_value in (-1, True, 1.5, None):
        with pytest.raises(ValueError, match="estimate"):
            IDENTITY.to_real(bad_value)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="real"):
            IDENTITY.to_estimate(bad_value)  # type: ignore[arg-type]


_models = st.builds(
    SizeModel,
    overhead=st.integers(0, 10**6),
    k=st.floats(CALIBRATION_MIN, CALIBRATION_MAX) | st.sampled_from([1.0, 1.1, 0.3, 2.5]),
)


@settings(max_examples=400, deadline=None)
@given(model=_models, a=st.integers(0, 10**9), b=st.integers(0, 10**9))
def test_size_model_conversions_are_monotone_and_consistent(
    model: SizeModel, a: int, b: int
) -> None:
    low, high = min(a, b), max(a, b)
    assert model.to_real(low) <= model.to_real(high)
    assert model.to_estimate(low) <= model.to_estimate(high)
    fitted = model.to_estimate(high)
    if high >= model.to_real(0):
        assert model.to_real(fitted) <= high
        assert model.to_real(fitted + 1) > high, "the largest estimate that fits"
    else:
        assert fitted == 0
    assert model.to_estimate(model.to_real(low)) >= low


def test_estimate_inputs_are_validated() -> None:
    meter = TokenMeter()
    for bad in (-1, True, 1.5, "10", None):
        with pytest.raises(ValueError, match="estimate"):
            meter.note_request_estimate(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="estimate"):
            meter.figure(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="room"):
            meter.note_request_estimate(1, room=bad if bad is not None else -1)  # type: ignore[arg-type]


def test_a_rejected_reading_awaits_confirmation_exactly_as_snapshotted() -> None:
    """The gate's state is the meter's: a rollback to before a rejected reading forgets it, so
    the next implausible reading is rejected again rather than taken as its confirmation."""
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    before = meter.snapshot()
    meter.note_request_estimate(1_000, accounted=1_000, room=10_000)
    assert record(input_tokens=50_000)
    assert meter.figure(1_000) is None, "rejected: answers nothing"
    [rejection] = meter.take_rejections()
    assert rejection.payload() == {
        "reading_tokens": 50_000,
        "carried_tokens": 1_000,
        "input_room": 10_000,
        "rejections": 1,
    }
    meter.restore(before)
    meter.note_request_estimate(1_000, accounted=1_000, room=10_000)
    assert record(input_tokens=50_000)
    assert meter.figure(1_000) is None, "rejected again, not confirmed"
    meter.note_request_estimate(1_000, accounted=1_000, room=10_000)
    assert record(input_tokens=50_000)
    assert meter.figure(1_000) == 50_000, "two in a row: confirmed"
    assert meter.learned_overhead == 49_152
    assert [r.rejections for r in meter.take_rejections()] == [1], "counted from the snapshot"


def test_a_meter_restored_mid_request_answers_as_one_that_never_left() -> None:
    """Every part of a pending request and of what the meter has learned comes back with a
    snapshot: the view's accounted size and room, the learned overhead, the gate's hold."""

    def prepared() -> tuple[TokenMeter, Any]:
        meter = TokenMeter()
        record = meter.claim_foreground_usage()
        for _ in range(2):  # implausible twice in a row: confirmed, an overhead is learned
            meter.note_request_estimate(1_000, accounted=1_000, room=10_000)
            assert record(input_tokens=50_000)
        meter.note_request_estimate(1_000, accounted=1_000, room=60_000)
        assert record(input_tokens=200_000)  # implausible again: held, awaiting confirmation
        meter.take_rejections()
        # Left pending: a view of 2,000 that carried 2,500 with tools, in a room of 100,000.
        meter.note_request_estimate(2_000, accounted=2_500, room=100_000)
        return meter, record

    meter, record = prepared()
    twin, twin_record = prepared()
    before = meter.snapshot()
    meter.note_request_estimate(5, accounted=5, room=6)  # a detour that is rolled back
    assert record(input_tokens=7)
    meter.restore(before)
    assert meter.learned_overhead == twin.learned_overhead > 0
    for recorder in (record, twin_record):
        assert recorder(input_tokens=210_000)  # confirms the held one
    assert meter.take_rejections() == twin.take_rejections()
    assert meter.figure(2_000) == twin.figure(2_000) == 210_000
    assert meter.learned_overhead == twin.learned_overhead
    assert meter.size_model == twin.size_model
    # The confirmation released the hold: the next implausible reading waits again.
    for each, recorder in ((meter, record), (twin, twin_record)):
        each.note_request_estimate(2_000, accounted=2_500, room=100_000)
        assert recorder(input_tokens=400_000)
        assert [r.payload()["reading_tokens"] for r in each.take_rejections()] == [400_000]


def test_a_pending_request_restored_keeps_the_room_its_reading_is_judged_in() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(2_000, accounted=2_500, room=100_000)
    before = meter.snapshot()
    meter.note_request_estimate(5)  # a detour that is rolled back
    meter.restore(before)
    assert record(input_tokens=210_000)
    [rejection] = meter.take_rejections()
    assert rejection.payload() == {
        "reading_tokens": 210_000,
        "carried_tokens": 2_500,
        "input_room": 100_000,
        "rejections": 1,
    }


def test_a_reading_of_equal_input_and_cache_writes_is_their_sum() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    assert record(input_tokens=700, cache_write_tokens=700)
    assert meter.latest_reading == 1_400
    assert not record(input_tokens=0, cache_write_tokens=0), "nothing read is no reading"


def test_a_rollback_counts_every_reading_that_arrived_meanwhile() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    before = meter.snapshot()
    for tokens in range(1, 41):  # more than the meter keeps by value
        assert record(input_tokens=tokens)
    meter.restore_keeping_readings(before)
    assert meter.reading_count == 40
    assert meter.latest_reading == 40


def test_a_rejected_reading_replayed_by_a_rollback_is_reported_once() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(2_000, accounted=2_500, room=100_000)
    before = meter.snapshot()
    assert record(input_tokens=210_000)  # rejected (and reported) during the request
    meter.restore_keeping_readings(before)  # the request is rolled back; the reading replayed
    assert [r.payload()["reading_tokens"] for r in meter.take_rejections()] == [210_000]
    # Replayed, it is judged as it was: held, so the next such reading confirms it.
    meter.note_request_estimate(2_000, accounted=2_500, room=100_000)
    assert record(input_tokens=210_000)
    assert meter.take_rejections() == ()
    assert meter.figure(2_000) == 210_000


def test_an_excess_is_held_back_in_whole_steps_without_a_bias_to_take_off() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(1_000, accounted=1_000, room=100_000)
    assert record(input_tokens=1_257)  # 257 over what the request carried: two steps
    assert not meter.size_model.sloped, "one pair: no slope, so no bias"
    assert meter.held_overhead("actual") == meter.held_overhead("estimate") == 512


def test_only_a_view_of_no_tokens_makes_no_pair() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(0)
    assert record(input_tokens=300)
    assert meter.pair_count == 0
    meter.note_request_estimate(1)
    assert record(input_tokens=300)
    assert meter.pair_count == 1


@pytest.mark.parametrize("key", ["accounted", "room"])
def test_a_bad_accounted_figure_or_room_is_named(key: str) -> None:
    with pytest.raises(ValueError) as error:
        TokenMeter().note_request_estimate(10, **{key: -1})
    assert str(error.value) == f"note_request_estimate: {key} must be a non-negative int, got -1"


def test_a_new_meter_has_no_claim_and_figures_never_go_below_zero() -> None:
    meter = TokenMeter()
    assert meter.foreground_claimed is False
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(10_000)
    assert record(input_tokens=100)  # a tenth of a percent: k is held at its lower bound
    assert meter.figure(0) == 0


def test_a_reset_meter_is_a_fresh_one_that_kept_its_claim() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    for estimate in (1_000, 2_000):
        meter.note_request_estimate(estimate)
        assert record(input_tokens=estimate + 500)
    meter.note_request_estimate(3_000, accounted=3_100, room=50_000)  # left pending
    meter.reset()
    fresh = TokenMeter()
    fresh.claim_foreground_usage()
    assert meter.snapshot() == fresh.snapshot()
    # And it goes on as one: a rollback over readings and a new pair both work.
    before = meter.snapshot()
    meter.note_request_estimate(1_000, accounted=1_000)
    assert record(input_tokens=1_100)
    meter.restore_keeping_readings(before)
    assert meter.latest_reading == 1_100


def test_estimates_have_no_upper_bound() -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(10**15)
    assert record(input_tokens=10**15 + 7)
    assert meter.size_model == SizeModel(7, 1.0)
    assert meter.figure(10**18) == 10**18 + 7


# -- snapshot / restore / reset ------------------------------------------------------


async def test_snapshot_restore_is_exact() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(500)
    await _emit(hooks, {"usage": {"input_tokens": 800}})
    # Left pending on purpose, with what the request accounted for and the room it had.
    meter.note_request_estimate(900, accounted=850, room=10_000)
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
    assert meter.pair_count == 2
    assert meter.size_model == fit_size_model([(500, 800), (900, 900)])
    # ... and learns from it what a meter that never took the detour learns.
    twin, twin_hooks, _ = _mounted()
    twin.note_request_estimate(500)
    await _emit(twin_hooks, {"usage": {"input_tokens": 800}})
    twin.note_request_estimate(900, accounted=850, room=10_000)
    await _emit(twin_hooks, {"usage": {"input_tokens": 900}})
    assert meter.snapshot() == twin.snapshot()
    assert meter.learned_overhead == twin.learned_overhead


def test_snapshot_is_immutable_and_restore_rejects_foreign_values() -> None:
    meter = TokenMeter()
    snap = meter.snapshot()
    with pytest.raises(AttributeError):
        snap.latest_reading = 5  # type: ignore[attr-defined]
    for restore in (meter.restore, meter.restore_keeping_readings):
        with pytest.raises(TypeError, match=r"TokenMeter.snapshot\(\), got <class 'dict'>$"):
            restore({"latest_reading": 5})


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
        view_estimate=400,
    )


async def test_choose_usage_actual_uses_reading_plus_growth() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(400)
    await _emit(hooks, {"usage": {"input_tokens": 700, "cache_write_tokens": 100}})
    stats = choose_usage(
        mode="actual", estimated=450, meter=meter, budget=1000, view_has_images=True
    )
    assert stats.source == "actual"
    # 800 measured for a view estimated at 400: 400 tokens of overhead, k = 1; the view
    # grew by 50 estimated tokens since.
    assert stats.used == 850
    assert stats.measured == 800
    assert stats.estimated == 450
    assert stats.ratio == pytest.approx(0.85)
    assert stats.images_measured is True
    assert (stats.calibration_ratio, stats.overhead) == (1.0, 400)
    shrunk = choose_usage(
        mode="actual", estimated=300, meter=meter, budget=1000, view_has_images=False
    )
    assert shrunk.used == 700, "a smaller view lowers the figure below the reading"
    whole = choose_usage(
        mode="actual",
        estimated=450,
        view_estimate=500,
        meter=meter,
        budget=1000,
        view_has_images=False,
    )
    assert whole.used == 900, "the figure follows the whole view (notice included)"
    assert whole.estimated == 450
    assert whole.images_measured is False


async def test_a_low_reading_lowers_the_trigger_figure() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(1_000)
    await _emit(hooks, {"usage": {"input_tokens": 500}})
    stats = choose_usage(
        mode="actual", estimated=1_200, meter=meter, budget=1_100, view_has_images=False
    )
    assert stats.used == 600 < stats.estimated


async def test_choose_usage_estimate_mode_reports_but_ignores_reading() -> None:
    meter, hooks, _ = _mounted()
    meter.note_request_estimate(300)
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
    await _emit(hooks, {"usage": {"input_tokens": 7}})
    stats = choose_usage(
        mode="actual", estimated=120, meter=meter, budget=1000, view_has_images=False
    )
    payload = stats.as_dict()
    assert json.loads(json.dumps(payload)) == payload
    assert payload == {
        "mode": "actual",
        "source": "actual",
        "used": 170,
        "estimated": 120,
        "measured": 150,
        "budget": 1000,
        "ratio": 0.17,
        "images_measured": False,
        "calibration_ratio": 1.0,
        "overhead": 50,
        "latest_reading": 7,
        "view_estimate": 120,
    }


def test_budgets_and_estimates_have_no_upper_bound() -> None:
    stats = choose_usage(
        mode="actual", estimated=2**40, meter=TokenMeter(), budget=10**12, view_has_images=False
    )
    assert (stats.used, stats.budget) == (2**40, 10**12)


async def test_a_trillion_token_budget_serves_a_plain_request() -> None:
    for mode in ("estimate", "actual"):
        manager = SimpleContextManager(token_meter=mode)
        await manager.add_message({"role": "user", "content": "hello"})
        view = await manager.get_messages_for_request(token_budget=10**12)
        assert [m["content"] for m in view] == ["hello"]
        big = SimpleContextManager(token_meter=mode, max_tokens=10**12)
        await big.add_message({"role": "user", "content": "hello"})
        assert len(await big.get_messages_for_request()) == 1


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"mode": "auto"}, "mode"),
        ({"estimated": -1}, "estimated"),
        ({"estimated": True}, "estimated"),
        ({"budget": 0}, "budget"),
        ({"budget": -5}, "budget"),
        ({"budget": 10.0}, "budget"),
        ({"budget": True}, "budget"),
        ({"view_estimate": -1}, "view_estimate"),
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


@pytest.mark.parametrize("arrived", [0, 1, 2])
def test_undoing_a_delivery_applies_again_only_the_readings_that_arrived_since(
    arrived: int,
) -> None:
    meter = TokenMeter()
    record = meter.claim_foreground_usage()
    meter.note_request_estimate(1_000)
    record(input_tokens=1_200)
    meter.note_request_estimate(1_100)  # the view that went out, still unanswered
    before = meter.snapshot()
    for k in range(arrived):
        record(input_tokens=1_300 + k)
    meter.note_request_estimate(5_000)  # the undone request's view
    meter.restore_keeping_readings(before)
    # The readings of before the snapshot are not applied twice (nor paired again).
    assert meter.reading_count == 1 + arrived
    assert meter.pair_count == 1 + min(arrived, 1)
    assert meter.answered_reading == (1_300 if arrived else 1_200)
    assert meter.latest_reading == 1_200 + (100 + arrived - 1 if arrived else 0)
