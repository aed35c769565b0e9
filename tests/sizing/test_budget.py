"""Tests for budget derivation and its provenance (_budget)."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest
from amplifier_core.models import ModelInfo, ProviderInfo
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple.sizing import _budget
from amplifier_module_context_simple.sizing._budget import (
    SAFETY_MARGIN_TOKENS,
    Budget,
    BudgetEventGate,
    derive_budget,
)

BASE_KEYS = {
    "source",
    "derived_budget",
    "max_tokens",
    "max_tokens_fallback",
    "capped",
    "effective_budget",
}
BASE_KEYS |= {
    "tool_definitions_tokens",
    "tools_not_held_back",
    "learned_overhead_tokens",
    "request_budget",
}
PROVIDER_KEYS = BASE_KEYS | {
    "context_window",
    "max_output_tokens",
    "requested_output",
    "output_source",
    "reserved_output",
    "safety_margin",
}


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    # The module logs each distinct provider problem once; tests must not share that.
    _budget.PROVIDER_WARNINGS.clear()


def model_info(window: int, max_output: int, model_id: str = "gemini-2.5-pro") -> ModelInfo:
    return ModelInfo(
        id=model_id, display_name=model_id, context_window=window, max_output_tokens=max_output
    )


def provider_info(defaults: dict[str, Any] | None = None) -> ProviderInfo:
    return ProviderInfo(id="fakeprov", display_name="Fake", defaults=defaults or {})


class Boom(RuntimeError):
    pass


class SyncProvider:
    """Sync methods returning the host's pydantic types."""

    def __init__(self, mi: object = None, pi: object = None) -> None:
        self._mi = mi
        self._pi = pi
        self.calls: list[str] = []

    def get_model_info(self) -> object:
        self.calls.append("get_model_info")
        if isinstance(self._mi, Exception):
            raise self._mi
        return self._mi

    def get_info(self) -> object:
        self.calls.append("get_info")
        if isinstance(self._pi, Exception):
            raise self._pi
        return self._pi


class AsyncProvider(SyncProvider):
    async def get_model_info(self) -> object:  # type: ignore[override]
        return super().get_model_info()

    async def get_info(self) -> object:  # type: ignore[override]
        return super().get_info()


class InfoOnlyProvider:
    """A provider with only the protocol's get_info (no get_model_info attribute)."""

    def __init__(self, pi: object) -> None:
        self._pi = pi

    def get_info(self) -> object:
        return self._pi


async def derive(
    provider: object | None = None,
    *,
    token_budget: int | None = None,
    max_tokens: int | None = None,
    max_tokens_fallback: int = 200_000,
    output_reserve_fraction: float = 1.0,
    requested_output: int | None = None,
) -> Budget:
    return await derive_budget(
        token_budget=token_budget,
        provider=provider,
        max_tokens=max_tokens,
        max_tokens_fallback=max_tokens_fallback,
        output_reserve_fraction=output_reserve_fraction,
        requested_output=requested_output,
    )


# --- worked numbers --------------------------------------------------------------------------


async def test_worked_example_one_million_window() -> None:
    budget = await derive(SyncProvider(mi=model_info(1_048_576, 65_536)))
    assert budget.source == "provider_model_info"
    assert budget.reserved_output == 65_536
    assert budget.derived_budget == 978_944 == 1_048_576 - 65_536 - SAFETY_MARGIN_TOKENS
    assert budget.effective_budget == 978_944
    assert budget.capped is False
    assert budget.model_name == "gemini-2.5-pro"


async def test_worked_example_two_hundred_k_window() -> None:
    budget = await derive(SyncProvider(mi=model_info(200_000, 64_000)))
    assert budget.derived_budget == 131_904
    assert budget.effective_budget == 131_904


async def test_spec_example_payload_from_provider_defaults() -> None:
    provider = InfoOnlyProvider(
        provider_info({"context_window": 1_048_576, "max_output_tokens": 65_536})
    )
    budget = await derive(provider, max_tokens=500_000)
    assert budget.payload() == {
        "source": "provider_defaults",
        "context_window": 1048576,
        "max_output_tokens": 65536,
        "requested_output": 65536,
        "output_source": "max_output_tokens",
        "reserved_output": 65536,
        "safety_margin": 4096,
        "tool_definitions_tokens": 0,
        "tools_not_held_back": 0,
        "learned_overhead_tokens": 0,
        "derived_budget": 978944,
        "max_tokens": 500000,
        "max_tokens_fallback": 200000,
        "capped": True,
        "effective_budget": 500000,
        "request_budget": 500000,
    }
    json.dumps(budget.payload())  # JSON-safe


async def test_reserve_fraction_is_applied_and_rounded_up() -> None:
    budget = await derive(
        SyncProvider(mi=model_info(100_000, 10_001)), output_reserve_fraction=0.25
    )
    assert budget.reserved_output == 2_501  # never less than the share asked for
    assert budget.derived_budget == 100_000 - 2_501 - SAFETY_MARGIN_TOKENS
    full = await derive(SyncProvider(mi=model_info(100_000, 10_000)), output_reserve_fraction=1)
    assert full.derived_budget == 100_000 - 10_000 - SAFETY_MARGIN_TOKENS
    none = await derive(SyncProvider(mi=model_info(100_000, 10_000)), output_reserve_fraction=0)
    assert none.reserved_output == 0


# --- the max_tokens cap ----------------------------------------------------------------------


async def test_cap_below_window_bites() -> None:
    budget = await derive(SyncProvider(mi=model_info(1_048_576, 65_536)), max_tokens=500_000)
    assert budget.derived_budget == 978_944
    assert budget.effective_budget == 500_000
    assert budget.capped is True


async def test_cap_above_window_is_a_no_op() -> None:
    budget = await derive(SyncProvider(mi=model_info(200_000, 64_000)), max_tokens=1_000_000)
    assert budget.effective_budget == budget.derived_budget == 131_904
    assert budget.capped is False


async def test_cap_equal_to_budget_is_not_capped() -> None:
    budget = await derive(SyncProvider(mi=model_info(200_000, 64_000)), max_tokens=131_904)
    assert budget.effective_budget == 131_904
    assert budget.capped is False


async def test_unset_cap_leaves_provider_budget_untouched() -> None:
    budget = await derive(SyncProvider(mi=model_info(200_000, 64_000)), max_tokens=None)
    assert budget.max_tokens is None
    assert budget.effective_budget == 131_904 and budget.capped is False


async def test_cap_applies_on_explicit_path() -> None:
    budget = await derive(token_budget=300_000, max_tokens=100_000)
    assert (budget.source, budget.derived_budget, budget.effective_budget, budget.capped) == (
        "explicit",
        300_000,
        100_000,
        True,
    )
    loose = await derive(token_budget=50_000, max_tokens=100_000)
    assert (loose.effective_budget, loose.capped) == (50_000, False)


async def test_cap_applies_on_fallback_path() -> None:
    budget = await derive(None, max_tokens=120_000)
    assert (budget.source, budget.derived_budget, budget.effective_budget, budget.capped) == (
        "max_tokens_fallback",
        200_000,
        120_000,
        True,
    )
    loose = await derive(None, max_tokens=400_000, max_tokens_fallback=150_000)
    assert (loose.effective_budget, loose.capped) == (150_000, False)


# --- priority order and fall-through ------------------------------------------------------


async def test_explicit_beats_provider_without_reading_its_window() -> None:
    provider = SyncProvider(mi=model_info(200_000, 64_000), pi=provider_info())
    budget = await derive(provider, token_budget=90_000)
    assert budget.source == "explicit"
    assert budget.effective_budget == 90_000
    assert budget.context_window is None
    assert budget.model_name == "gemini-2.5-pro"  # still looked up, best-effort


async def test_model_info_beats_defaults() -> None:
    provider = SyncProvider(
        mi=model_info(200_000, 64_000),
        pi=provider_info({"context_window": 1_048_576, "max_output_tokens": 65_536}),
    )
    budget = await derive(provider)
    assert budget.source == "provider_model_info"
    assert provider.calls == ["get_model_info"]


async def test_model_info_raising_falls_to_defaults(caplog: pytest.LogCaptureFixture) -> None:
    provider = SyncProvider(
        mi=Boom("no model info"),
        pi=provider_info({"context_window": 200_000, "max_output_tokens": 64_000, "model": "m1"}),
    )
    with caplog.at_level(logging.WARNING, logger=_budget.__name__):
        budget = await derive(provider)
    assert budget.source == "provider_defaults"
    assert budget.effective_budget == 131_904
    assert budget.model_name == "m1"
    assert "get_model_info" in caplog.text and "no model info" in caplog.text


async def test_both_raising_falls_back_without_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = SyncProvider(mi=Boom("a"), pi=Boom("b"))
    with caplog.at_level(logging.WARNING, logger=_budget.__name__):
        budget = await derive(provider)
    assert budget.source == "max_tokens_fallback"
    assert budget.effective_budget == 200_000
    assert budget.model_name is None
    assert "max_tokens_fallback=200000" in caplog.text


async def test_repeated_problems_are_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    provider = SyncProvider(mi=Boom("a"), pi=Boom("b"))
    with caplog.at_level(logging.WARNING, logger=_budget.__name__):
        for _ in range(5):
            await derive(provider)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3  # get_model_info, get_info, fallback: once each


async def test_async_provider_methods_are_awaited() -> None:
    provider = AsyncProvider(
        mi=Boom("x"),
        pi=provider_info({"context_window": 200_000, "max_output_tokens": 64_000}),
    )
    budget = await derive(provider)
    assert budget.source == "provider_defaults"
    assert budget.derived_budget == 131_904
    good = await derive(AsyncProvider(mi=model_info(1_048_576, 65_536)))
    assert good.source == "provider_model_info" and good.derived_budget == 978_944


async def test_dict_style_model_info_and_object_style_defaults() -> None:
    dict_mi = SyncProvider(mi={"context_window": 200_000, "max_output_tokens": 64_000, "id": "d"})
    budget = await derive(dict_mi)
    assert (budget.source, budget.derived_budget, budget.model_name) == (
        "provider_model_info",
        131_904,
        "d",
    )

    class Defaults:
        context_window = 1_048_576
        max_output_tokens = 65_536
        model = "from-defaults"

    class Info:
        defaults = Defaults()

    budget = await derive(InfoOnlyProvider(Info()))
    assert (budget.source, budget.derived_budget, budget.model_name) == (
        "provider_defaults",
        978_944,
        "from-defaults",
    )


async def test_async_info_only_provider_via_dict_info() -> None:
    class P:
        async def get_info(self) -> dict[str, Any]:
            return {"defaults": {"context_window": 200_000, "max_output_tokens": 64_000}}

    budget = await derive(P())
    assert budget.source == "provider_defaults" and budget.derived_budget == 131_904


async def test_no_provider_uses_fallback() -> None:
    budget = await derive(None, max_tokens_fallback=400_000)
    assert budget.source == "max_tokens_fallback"
    assert budget.derived_budget == budget.effective_budget == 400_000
    assert budget.capped is False
    assert (budget.context_window, budget.max_output_tokens, budget.reserved_output) == (
        None,
        None,
        None,
    )


async def test_provider_without_any_info_methods_uses_fallback() -> None:
    budget = await derive(object())
    assert budget.source == "max_tokens_fallback"


async def test_empty_defaults_uses_fallback() -> None:
    budget = await derive(InfoOnlyProvider(provider_info({"timeout": 30})))
    assert budget.source == "max_tokens_fallback"
    assert budget.model_name == "fakeprov"  # provider id, the last name candidate


@pytest.mark.parametrize(
    ("window", "max_output"),
    [
        (None, 64_000),
        (True, 64_000),
        ("200000", 64_000),
        (200_000.0, 64_000),
        (0, 64_000),
        (-5, 64_000),
    ],
)
async def test_unusable_windows_fall_through(
    window: object, max_output: object, caplog: pytest.LogCaptureFixture
) -> None:
    defaults = {"context_window": 200_000, "max_output_tokens": 64_000}
    provider = SyncProvider(
        mi={"context_window": window, "max_output_tokens": max_output},
        pi=provider_info(defaults),
    )
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        budget = await derive(provider)
    assert budget.source == "provider_defaults"
    assert budget.derived_budget == 131_904
    # The provider's bug is named: the window it published and where.
    assert f"Ignoring get_model_info(): context_window={window!r} is not a positive integer" in [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
    ]


@given(room=st.integers(1, 500_000), tools=st.integers(0, 600_000), learned=st.integers(0, 9))
async def test_the_derived_budget_is_the_room_less_what_is_held_back_and_at_least_one(
    room: int, tools: int, learned: int
) -> None:
    budget = await derive_budget(
        token_budget=None,
        provider=None,
        max_tokens=None,
        max_tokens_fallback=room,
        output_reserve_fraction=1.0,
        held_back=lambda _name: (tools, learned),
    )
    aside = tools + min(learned, room)
    assert budget.derived_budget == (room - aside if aside < room else 1)
    assert budget.starved == (aside >= room)


async def test_smallest_window_keeps_its_budget_inside_it() -> None:
    budget = await derive(SyncProvider(mi={"context_window": 4_098, "max_output_tokens": 2}))
    assert budget.source == "provider_model_info"
    assert budget.derived_budget == 4_098 - 2 - 4_098 // 16


async def test_mock_provider_does_not_break_derivation() -> None:
    from unittest.mock import AsyncMock, MagicMock

    for provider in (MagicMock(), AsyncMock()):
        budget = await derive(provider)
        assert budget.source == "max_tokens_fallback"


async def test_raising_attribute_access_is_tolerated() -> None:
    class Hostile:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"no {name}")

    budget = await derive(Hostile())
    assert budget.source == "max_tokens_fallback"


async def test_cancellation_is_not_swallowed() -> None:
    import asyncio

    class Cancelled:
        async def get_model_info(self) -> object:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await derive(Cancelled())


async def test_explicit_name_lookup_failure_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=_budget.__name__):
        budget = await derive(SyncProvider(mi=Boom("x"), pi=Boom("y")), token_budget=10_000)
    assert budget.source == "explicit" and budget.model_name is None
    assert caplog.records == []


# --- invalid caller input ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "100"])
async def test_invalid_explicit_budget_raises(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"^token_budget must be "):
        await derive(token_budget=bad)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": False}, "max_tokens"),
        ({"max_tokens_fallback": 0}, "max_tokens_fallback"),
        ({"max_tokens_fallback": 1.0}, "max_tokens_fallback"),
        ({"output_reserve_fraction": 1.5}, "output_reserve_fraction"),
        ({"output_reserve_fraction": -0.1}, "output_reserve_fraction"),
        ({"output_reserve_fraction": float("nan")}, "output_reserve_fraction"),
        ({"output_reserve_fraction": True}, "output_reserve_fraction"),
        ({"requested_output": 0}, "max_output_tokens"),
        ({"requested_output": 2.5}, "max_output_tokens"),
    ],
)
async def test_invalid_config_raises_naming_the_key(kwargs: dict[str, Any], key: str) -> None:
    # The message opens with the key as the caller spells it.
    with pytest.raises(ValueError, match=rf"^{key} must be "):
        await derive(None, **kwargs)


# --- payload key sets ----------------------------------------------------------------------


async def test_payload_keys_per_source() -> None:
    cases = {
        "explicit": await derive(token_budget=1_000),
        "provider_model_info": await derive(SyncProvider(mi=model_info(200_000, 64_000))),
        "provider_defaults": await derive(
            InfoOnlyProvider(provider_info({"context_window": 200_000, "max_output_tokens": 1}))
        ),
        "max_tokens_fallback": await derive(None),
    }
    for source, budget in cases.items():
        payload = budget.payload()
        assert payload["source"] == source
        expected = PROVIDER_KEYS if source.startswith("provider_") else BASE_KEYS
        assert set(payload) == expected, source
        assert "model_name" not in payload
        json.dumps(payload)


# --- the event gate -------------------------------------------------------------------------


def test_gate_reports_changes_only() -> None:
    gate = BudgetEventGate()
    a = {"source": "explicit", "effective_budget": 1}
    b = {"source": "explicit", "effective_budget": 2}
    assert gate.changed(a)
    gate.mark_emitted(a)
    assert not gate.changed(dict(a))
    assert gate.changed(b)
    gate.mark_emitted(b)
    assert gate.changed(a)


def test_gate_copies_and_rolls_back() -> None:
    gate = BudgetEventGate()
    payload = {"effective_budget": 1}
    gate.mark_emitted(payload)
    payload["effective_budget"] = 99  # caller mutation after emit must not leak in
    assert gate.last == {"effective_budget": 1}

    snap = gate.snapshot()
    gate.mark_emitted({"effective_budget": 2})
    gate.restore(snap)
    assert gate.last == {"effective_budget": 1}
    assert not gate.changed({"effective_budget": 1})

    empty = BudgetEventGate().snapshot()
    gate.restore(empty)
    assert gate.last is None and gate.changed({"effective_budget": 1})


def test_gate_reset() -> None:
    gate = BudgetEventGate()
    gate.mark_emitted({"x": 1})
    gate.reset()
    assert gate.last is None
    assert gate.changed({"x": 1})


class HeldBackFor:
    """What a request carries besides the view, per model name (nothing for the others);
    remembers the names it was asked for."""

    def __init__(self, figures: dict[str, tuple[int, int]]) -> None:
        self.figures = figures
        self.asked: list[str | None] = []

    def __call__(self, name: str | None) -> tuple[int, int]:
        self.asked.append(name)
        return self.figures.get(name or "", (0, 0))


@pytest.mark.parametrize(
    ("published", "expected"),
    [
        ({"model": "claude-a", "name": "claude-b", "id": "claude-c"}, "claude-a"),
        ({"name": "claude-b", "id": "claude-c"}, "claude-b"),
        ({"id": "claude-c"}, "claude-c"),
    ],
)
async def test_the_model_info_names_the_model_by_model_then_name_then_id(
    published: dict[str, str], expected: str
) -> None:
    held_back = HeldBackFor({})

    provider = SyncProvider(
        mi={**published, "context_window": 200_000, "max_output_tokens": 64_000}
    )
    budget = await derive_budget(
        token_budget=None,
        provider=provider,
        max_tokens=None,
        max_tokens_fallback=200_000,
        output_reserve_fraction=1.0,
        held_back=held_back,
    )
    assert budget.model_name == expected
    # What the request carries besides the view is weighed for that model.
    assert held_back.asked == [expected]


async def test_a_window_without_an_output_figure_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = SyncProvider(mi={"context_window": 200_000})
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        budget = await derive(provider)
    assert budget.source == "provider_model_info" and budget.max_output_tokens is None
    assert caplog.records == []


@pytest.mark.parametrize("max_output", [0, -3, "64000", 1.5, True])
async def test_an_unusable_output_figure_is_named_and_an_assumed_output_held_back(
    max_output: object, caplog: pytest.LogCaptureFixture
) -> None:
    provider = SyncProvider(mi={"context_window": 200_000, "max_output_tokens": max_output})
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        budget = await derive(provider)
    assert budget.source == "provider_model_info" and budget.max_output_tokens is None
    assert budget == await derive(SyncProvider(mi={"context_window": 200_000}))
    assert [r.getMessage() for r in caplog.records] == [
        f"Ignoring get_model_info()'s max_output_tokens={max_output!r} (not a positive "
        "integer); holding back an assumed output"
    ]


@pytest.mark.parametrize("token_budget", [10_000, None])
async def test_a_budget_from_elsewhere_weighs_what_it_carries_for_the_providers_model(
    token_budget: int | None,
) -> None:
    # A provider that names its model but publishes no window: the explicit budget, or the
    # fallback, still holds back what the request carries for that model.
    held_back = HeldBackFor({"claude-a": (300, 40)})

    budget = await derive_budget(
        token_budget=token_budget,
        provider=SyncProvider(mi={"model": "claude-a"}),
        max_tokens=None,
        max_tokens_fallback=200_000,
        output_reserve_fraction=1.0,
        held_back=held_back,
    )
    assert held_back.asked == ["claude-a"]
    assert budget.model_name == "claude-a" and budget.carried_tools == 300
    assert budget.margin == 0  # no window, so no margin held back from one
    if token_budget is None:
        assert budget.source == "max_tokens_fallback" and budget.effective_budget == 199_660
    else:
        # What the request carries besides adds to the caller's budget for the view.
        assert budget.request_budget == 10_340


async def test_an_assumed_output_is_a_whole_quarter_of_a_small_window() -> None:
    budget = await derive(SyncProvider(mi={"context_window": 10_001}))
    assert budget.output_source == "assumed"
    assert budget.requested_output == 2_500 and type(budget.requested_output) is int
    assert budget.reserved_output == 2_500


async def test_an_output_near_the_whole_window_leaves_the_input_its_share() -> None:
    window = 10_000
    budget = await derive(SyncProvider(mi={"context_window": window, "max_output_tokens": 9_999}))
    margin = _budget.safety_margin(window)
    floor = math.ceil(window * _budget.MIN_INPUT_SHARE)
    assert budget.reserved_output == window - margin - floor
    assert budget.derived_budget == floor


async def test_a_model_infos_own_max_tokens_is_the_output_it_sends() -> None:
    provider = SyncProvider(
        mi={"context_window": 200_000, "max_output_tokens": 64_000, "max_tokens": 8_000}
    )
    budget = await derive(provider)
    assert budget.output_source == "provider_defaults"
    assert budget.requested_output == 8_000 and budget.reserved_output == 8_000


async def test_unusable_defaults_and_the_fallback_are_named_word_for_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = InfoOnlyProvider(provider_info({"context_window": "big"}))
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        budget = await derive(provider, max_tokens_fallback=50_000)
    assert budget.source == "max_tokens_fallback"
    assert [r.getMessage() for r in caplog.records] == [
        "Ignoring get_info().defaults: context_window='big' is not a positive integer",
        "Provider InfoOnlyProvider published no usable context window; using "
        "max_tokens_fallback=50000",
    ]


async def test_a_requested_output_is_held_back_from_the_providers_defaults_too() -> None:
    defaults = {"context_window": 200_000, "max_output_tokens": 64_000}
    budget = await derive(InfoOnlyProvider(provider_info(defaults)), requested_output=5_000)
    assert budget.source == "provider_defaults"
    assert budget.output_source == "request" and budget.reserved_output == 5_000


async def test_a_provider_known_to_send_less_than_its_defaults_say_is_read_by_its_own_name() -> (
    None
):
    class Anthropic(InfoOnlyProvider):
        name = "anthropic"

    defaults = {"context_window": 200_000, "max_output_tokens": 64_000, "max_tokens": 4_096}
    budget = await derive(Anthropic(provider_info(defaults)))
    # Its defaults' max_tokens is not what it sends: the published output is held back.
    assert budget.output_source == "max_output_tokens" and budget.reserved_output == 64_000
