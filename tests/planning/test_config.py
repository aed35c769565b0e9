"""Configuration: defaults, validation errors that name the key, and the two soft keys."""

from __future__ import annotations

import logging
from dataclasses import fields

import pytest

from amplifier_module_context_simple import ContextConfig, SimpleContextManager
from amplifier_module_context_simple.history._ingress import MIN_TOOL_RESULT_BYTES
from amplifier_module_context_simple.planning._config import (
    MAP_MOST_TOKENS,
    CommandLineOption,
    command_line_option,
    unknown_keys_text,
    warn_about_settings,
)
from amplifier_module_context_simple.sizing._estimate import FAMILIES

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


# --- each rule's words, and its edges ---------------------------------------------------------

FRACTIONS = ("compact_threshold", "target_usage")
FRACTIONS_OR_ZERO = (
    "protected_recent",
    "compaction_map_share",
    "output_reserve_fraction",
    "cold_cache_distance",
)


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("max_tokens_fallback", 0, "a positive integer"),
        ("max_tokens_fallback", 2.0, "a positive integer"),
        ("protected_tool_results", -1, "an integer >= 0"),
        ("truncate_chars", "250", "an integer >= 0"),
        ("compaction_notice_min_level", 1.0, "an integer"),
        ("compaction_notice_min_level", True, "an integer"),
        *((key, 0, "a number with 0 < x <= 1") for key in FRACTIONS),
        *((key, 1.0001, "a number with 0 < x <= 1") for key in FRACTIONS),
        *((key, "half", "a number with 0 < x <= 1") for key in FRACTIONS),
        *((key, -0.01, "a number with 0 <= x <= 1") for key in FRACTIONS_OR_ZERO),
        *((key, 1.5, "a number with 0 <= x <= 1") for key in FRACTIONS_OR_ZERO),
        *((key, None, "a number with 0 <= x <= 1") for key in FRACTIONS_OR_ZERO),
        ("cache_ttl_seconds", -1, "a finite number >= 0"),
        ("cache_ttl_seconds", float("inf"), "a finite number >= 0"),
        ("cache_ttl_seconds", "300", "a finite number >= 0"),
        ("compaction_notice_enabled", 1, "true or false"),
        ("escalate_at_turn_start", "yes", "true or false"),
        ("compaction_notice_verbosity", "loud", "one of 'minimal', 'normal', 'verbose'"),
        ("compaction_notice_placement", "head", "one of 'in_place', 'tail'"),
        ("token_family", "gpt2", "one of " + ", ".join(repr(f) for f in FAMILIES)),
        (
            "max_tool_result_bytes",
            MIN_TOOL_RESULT_BYTES - 1,
            "an integer >= 205 (room for the marker)",
        ),
    ],
)
def test_each_rule_says_what_the_key_must_be(key: str, value: object, rule: str) -> None:
    with pytest.raises(ValueError) as error:
        ContextConfig.from_mapping({key: value})
    assert str(error.value) == f"context-simple config {key!r} must be {rule}; got {value!r}"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_tokens_fallback", 1),
        ("protected_tool_results", 0),
        ("truncate_chars", 0),
        ("compaction_notice_min_level", -2),
        *((key, 1) for key in FRACTIONS),
        *((key, 0.001) for key in FRACTIONS),
        *((key, 0) for key in FRACTIONS_OR_ZERO),
        *((key, 1) for key in FRACTIONS_OR_ZERO),
        ("cache_ttl_seconds", 0),
        ("cache_ttl_seconds", 3_600.5),
        ("compaction_notice_enabled", False),
        ("escalate_at_turn_start", True),
        *(("compaction_notice_verbosity", v) for v in ("minimal", "normal", "verbose")),
        *(("compaction_notice_placement", v) for v in ("in_place", "tail")),
        *(("token_family", f) for f in (*FAMILIES, None)),
        ("max_tool_result_bytes", MIN_TOOL_RESULT_BYTES),
    ],
)
def test_each_rule_takes_the_values_at_its_edges(key: str, value: object) -> None:
    config = ContextConfig.from_mapping({key: value})
    assert getattr(config, key) == value
    assert type(getattr(config, key)) is (
        float if key in (*FRACTIONS, *FRACTIONS_OR_ZERO, "cache_ttl_seconds") else type(value)
    )


def test_a_cache_ttl_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="cache_ttl_seconds"):
        ContextConfig.from_mapping({"cache_ttl_seconds": float("nan")})


def test_soft_keys_say_what_they_fall_back_to(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ContextConfig.from_mapping({"max_tokens": "64k", "token_meter": "exact"})
    assert [r.getMessage() for r in caplog.records] == [
        "context-simple: max_tokens='64k' is not a positive integer; running with no cap",
        "context-simple: token_meter='exact' is not 'estimate' or 'actual'; using 'estimate'",
    ]
    assert ContextConfig.from_mapping({"max_tokens": 1}).max_tokens == 1
    assert ContextConfig.from_mapping({"token_meter": "actual"}).token_meter == "actual"


def test_a_config_that_is_not_a_mapping_is_refused_by_its_type() -> None:
    with pytest.raises(TypeError) as error:
        ContextConfig.from_mapping([("max_tokens", 5)])  # type: ignore[arg-type]
    assert str(error.value) == "context-simple config must be a mapping, got list"


def test_unknown_keys_are_named_beside_the_nearest_known_one() -> None:
    known = ", ".join(f.name for f in fields(ContextConfig))
    assert unknown_keys_text(["compact_treshold"]) == (
        "unknown config key 'compact_treshold' (did you mean 'compact_threshold'?); "
        f"the keys are {known}"
    )
    assert unknown_keys_text(["zzz", "max_token"]) == (
        f"unknown config keys 'max_token' (did you mean 'max_tokens'?), 'zzz'; the keys are {known}"
    )


def test_unknown_keys_are_warned_about_with_their_names(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ContextConfig.from_mapping({"auto_compact": True})
    assert [r.getMessage() for r in caplog.records] == [
        "context-simple: ignoring " + unknown_keys_text(["auto_compact"])
    ]


def test_every_key_has_its_command_line_option() -> None:
    for f in fields(ContextConfig):
        option = command_line_option(f.name)
        assert isinstance(option, CommandLineOption) and option.help, f.name
    assert command_line_option("max_tokens") == CommandLineOption("Cap on the budget")
    assert command_line_option("compaction_notice_enabled").flag == "--notice"  # type: ignore[union-attr]
    with pytest.raises(KeyError) as error:
        command_line_option("max_token")
    assert error.value.args == ("no config key 'max_token'",)


def test_the_map_bound_is_its_share_of_the_budget_up_to_a_cap() -> None:
    config = ContextConfig(compaction_map_share=0.05)
    assert config.map_bound(10_000) == 500
    assert config.map_bound(10_019) == 500, "whole tokens, rounded down"
    assert config.map_bound(10**7) == MAP_MOST_TOKENS
    assert config.map_bound(-5) == 0
    assert ContextConfig(compaction_map_share=1.0).map_bound(0) == 0, "no budget, no map"
    assert ContextConfig(compaction_notice_enabled=False).map_bound(10_000) == 0


def test_a_target_at_or_above_the_trigger_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        warn_about_settings(ContextConfig(compact_threshold=0.6, target_usage=0.6))
        warn_about_settings(ContextConfig(compact_threshold=0.6, target_usage=0.59))
    assert [r.getMessage() for r in caplog.records] == [
        "context-simple: target_usage 0.6 is not below compact_threshold 0.6: a compaction "
        "aims for a view no smaller than the one that starts it, so it reduces next to nothing"
    ]
