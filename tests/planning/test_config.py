"""Configuration: defaults, validation errors that name the key, and the two soft keys."""

from __future__ import annotations

import logging

import pytest

from amplifier_module_context_simple import ContextConfig, SimpleContextManager

DEFAULTS = {
    "max_tokens": None,
    "max_tokens_fallback": 200_000,
    "compact_threshold": 0.92,
    "target_usage": 0.50,
    "protected_recent": 0.30,
    "protected_tool_results": 5,
    "truncate_chars": 250,
    "compaction_notice_enabled": True,
    "compaction_notice_token_reserve": 800,
    "compaction_notice_verbosity": "normal",
    "compaction_notice_min_level": 1,
    "output_reserve_fraction": 1.0,
    "token_meter": "estimate",
    "max_tool_result_bytes": 131_072,
    "token_family": None,
}


def test_defaults_match_the_documented_table() -> None:
    config = ContextConfig.from_mapping(None)
    assert {k: getattr(config, k) for k in DEFAULTS} == DEFAULTS


def test_manager_exposes_every_key_as_an_attribute() -> None:
    manager = SimpleContextManager(compact_threshold=0.8, max_tokens=64_000)
    for key, default in DEFAULTS.items():
        expected = {"compact_threshold": 0.8, "max_tokens": 64_000}.get(key, default)
        assert getattr(manager, key) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_tokens_fallback", 0),
        ("max_tokens_fallback", True),
        ("compact_threshold", 0),
        ("compact_threshold", 1.5),
        ("compact_threshold", "0.9"),
        ("target_usage", -0.1),
        ("protected_recent", 1.01),
        ("protected_tool_results", -1),
        ("protected_tool_results", 2.5),
        ("truncate_chars", False),
        ("compaction_notice_enabled", 1),
        ("compaction_notice_token_reserve", -5),
        ("compaction_notice_verbosity", "loud"),
        ("compaction_notice_min_level", "1"),
        ("output_reserve_fraction", 2),
        ("max_tool_result_bytes", 204),
        ("token_family", "gpt2"),
    ],
)
def test_bad_values_raise_naming_key_and_value(key: str, value: object) -> None:
    with pytest.raises(ValueError) as error:
        ContextConfig.from_mapping({key: value})
    assert key in str(error.value)
    assert repr(value) in str(error.value)


def test_target_may_sit_at_or_above_the_threshold() -> None:
    config = ContextConfig.from_mapping({"compact_threshold": 0.5, "target_usage": 0.9})
    assert config.target_usage == 0.9


@pytest.mark.parametrize("value", [0, -3, "64k", 1.5, True])
def test_bad_max_tokens_warns_and_means_no_cap(
    value: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        config = ContextConfig.from_mapping({"max_tokens": value})
    assert config.max_tokens is None
    assert "max_tokens" in caplog.text


def test_unknown_meter_mode_warns_and_estimates(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = ContextConfig.from_mapping({"token_meter": "exact"})
    assert config.token_meter == "estimate"
    assert "token_meter" in caplog.text


def test_unknown_keys_are_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = ContextConfig.from_mapping({"compact_treshold": 0.8, "max_token": 5})
    assert config.compact_threshold == 0.92
    warnings = [r for r in caplog.records if "unknown" in r.getMessage()]
    assert len(warnings) == 1
    assert "compact_treshold" in warnings[0].getMessage()
    assert "max_token" in warnings[0].getMessage()


def test_config_is_frozen() -> None:
    config = ContextConfig.from_mapping({})
    with pytest.raises(AttributeError):
        config.compact_threshold = 0.5  # type: ignore[misc]


def test_constructor_validates_like_mount() -> None:
    with pytest.raises(ValueError, match="target_usage"):
        SimpleContextManager(target_usage=0)


def test_derived_budget_rules() -> None:
    config = ContextConfig(compact_threshold=0.8, target_usage=0.5)
    assert config.notice_reserve == 800
    assert config.usable_budget(10_800) == 10_000  # the notice reserve is held back
    assert config.trigger(10_800) == pytest.approx(8_000)
    assert config.target(10_800) == 5_000
    # A reserve that would leave nothing is ignored; with the notice off there is none.
    assert config.usable_budget(800) == config.usable_budget(500) + 300 == 800
    quiet = ContextConfig(compaction_notice_enabled=False)
    assert quiet.notice_reserve == 0 and quiet.usable_budget(10_800) == 10_800
