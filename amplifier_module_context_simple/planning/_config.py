"""Configuration: one frozen, validated record built from the mount config.

Every key has a default, a rule, and an error that names the key, the rule and the value that
was received. Two keys (``max_tokens`` and ``token_meter``) warn and fall back instead of
raising, because the module's published contract has always treated them that way.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..history._ingress import MIN_TOOL_RESULT_BYTES
from ..sizing._estimate import FAMILIES
from ..vocabulary._numbers import is_int, is_number

# Exports the validated settings record and the choices its keys accept.
__all__ = [
    "MAP_MOST_TOKENS",
    "MIN_TOOL_RESULT_BYTES",
    "NOTICE_PLACEMENTS",
    "NOTICE_VERBOSITIES",
    "TOKEN_FAMILIES",
    "TOKEN_METER_MODES",
    "CommandLineOption",
    "ContextConfig",
    "command_line_option",
    "unknown_keys_text",
    "warn_about_settings",
]

logger = logging.getLogger(__name__)

NOTICE_VERBOSITIES = ("minimal", "normal", "verbose")
NOTICE_PLACEMENTS = ("in_place", "tail")
"""Where the compaction notice goes: where the left-out span was (stays put between
escalations), or at the tail of the view (the spec's placement; moves on every request)."""
TOKEN_METER_MODES = ("estimate", "actual")
MAP_MOST_TOKENS = 2_000
"""The most the notice's map takes, whatever the budget: on a roomy window every request
would read a share of it in names (measured on the built-in example, 128,000-token window:
findable 92.4% -> 97.7% at +1.7% priced input with this cap, 99.4% at +2.0% without)."""
TOKEN_FAMILIES = FAMILIES
"""The tokenizer families ``token_family`` accepts: the estimator's."""

_Check = Callable[[str, object], Any]
"""A key's rule: the validated value for ``(key, raw value)``, or a ``ValueError``."""
_CHECK = "check"
_OPTION = "option"


@dataclass(frozen=True)
class CommandLineOption:
    """How a key shows on the replay tool's command line (a field without one is not there).

    It sits in the field's metadata beside the rule, so a key's name, default, rule and option
    are written once. The runtime never reads it; ``replay.config_options`` does.
    """

    help: str
    """What it does, without the closing full stop; ``[default]`` and the stop are added."""
    flag: str | None = None
    """The option's name, when it is not ``--`` and the key with dashes."""
    default_text: str | None = None
    """What ``[...]`` shows, when it is not the field's default (or the default is ``None``)."""


def _key(default: Any, check: _Check, option: CommandLineOption | None = None) -> Any:
    """A config field: its default, its rule and, if it is on the command line, its option."""
    metadata: dict[str, object] = {_CHECK: check}
    if option is not None:
        metadata[_OPTION] = option
    return field(default=default, metadata=metadata)


def command_line_option(key: str) -> CommandLineOption | None:
    """The command-line option of config key ``key``, or ``None`` when it has none."""
    by_name = {f.name: f for f in fields(ContextConfig)}
    if key not in by_name:
        raise KeyError(f"no config key {key!r}")
    option = by_name[key].metadata.get(_OPTION)
    return option if isinstance(option, CommandLineOption) else None


def unknown_keys_text(names: Iterable[str]) -> str:
    """``unknown config key 'compact_treshold' (did you mean 'compact_threshold'?)``: each
    unknown key beside the nearest valid one, for the mount's warning and the constructor's
    error alike."""
    known = [f.name for f in fields(ContextConfig)]
    parts: list[str] = []
    for name in sorted(names):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        parts.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    plural = "s" if len(parts) > 1 else ""
    return f"unknown config key{plural} {', '.join(parts)}; the keys are {', '.join(known)}"


def _fail(key: str, rule: str, value: object) -> ValueError:
    return ValueError(f"context-simple config {key!r} must be {rule}; got {value!r}")


def _positive_int(key: str, value: object) -> int:
    if not is_int(value) or value <= 0:
        raise _fail(key, "a positive integer", value)
    return value


def _non_negative_int(key: str, value: object) -> int:
    if not is_int(value) or value < 0:
        raise _fail(key, "an integer >= 0", value)
    return value


def _any_int(key: str, value: object) -> int:
    if not is_int(value):
        raise _fail(key, "an integer", value)
    return value


# The rules are plain functions run when a config is validated, not closures made when the
# class is defined: what runs at import is out of reach of the mutation runs
# (docs/mutation-scores.md, `_price._exact_scale`).
def _fraction(key: str, value: object, *, allow_zero: bool) -> float:
    rule = "a number with 0 <= x <= 1" if allow_zero else "a number with 0 < x <= 1"
    if not is_number(value):
        raise _fail(key, rule, value)
    number = float(value)
    low_ok = number >= 0 if allow_zero else number > 0
    if not (low_ok and number <= 1):
        raise _fail(key, rule, value)
    return number


def _share(key: str, value: object) -> float:
    return _fraction(key, value, allow_zero=False)


def _share_or_zero(key: str, value: object) -> float:
    return _fraction(key, value, allow_zero=True)


def _non_negative_number(key: str, value: object) -> float:
    if not is_number(value) or not float(value) >= 0 or float(value) == float("inf"):
        raise _fail(key, "a finite number >= 0", value)
    return float(value)


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, "true or false", value)
    return value


def _one_of(key: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise _fail(key, "one of " + ", ".join(repr(c) for c in choices), value)
    return value  # type: ignore[return-value]


def _verbosity(key: str, value: object) -> str:
    return _one_of(key, value, NOTICE_VERBOSITIES)


def _placement(key: str, value: object) -> str:
    return _one_of(key, value, NOTICE_PLACEMENTS)


def _optional_family(key: str, value: object) -> str | None:
    if value is None:
        return None
    return _one_of(key, value, TOKEN_FAMILIES)


def _max_tokens_cap(key: str, value: object) -> int | None:
    # A bad cap must never make a session fail to start: the contract is "warn, no cap".
    if value is None:
        return None
    if is_int(value) and value > 0:
        return value
    logger.warning(
        "context-simple: %s=%r is not a positive integer; running with no cap", key, value
    )
    return None


def _meter_mode(key: str, value: object) -> str:
    if value in TOKEN_METER_MODES:
        return value
    logger.warning(
        "context-simple: %s=%r is not 'estimate' or 'actual'; using 'estimate'", key, value
    )
    return "estimate"


def _tool_result_bytes(key: str, value: object) -> int:
    if not is_int(value) or value < MIN_TOOL_RESULT_BYTES:
        raise _fail(key, f"an integer >= {MIN_TOOL_RESULT_BYTES} (room for the marker)", value)
    return value


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """The validated settings of one context manager.

    Each field is one key: its default, the rule that validates a mount-config value for it and,
    for the keys the replay tool offers, its :class:`CommandLineOption`. Adding a key is adding a
    field (and its test), plus the constructor keyword a test holds to the fields.
    """

    max_tokens: int | None = _key(None, _max_tokens_cap, CommandLineOption("Cap on the budget"))
    max_tokens_fallback: int = _key(
        200_000, _positive_int, CommandLineOption("Budget when no window is simulated")
    )
    compact_threshold: float = _key(
        0.92, _share, CommandLineOption("Compact at this share of the budget")
    )
    target_usage: float = _key(
        0.50,
        _share,
        CommandLineOption("Share of the budget compaction aims for"),
    )
    protected_recent: float = _key(
        0.30,
        _share_or_zero,
        CommandLineOption("Share of recent messages never left out"),
    )
    protected_tool_results: int = _key(
        5, _non_negative_int, CommandLineOption("Latest N tool results kept whole")
    )
    truncate_chars: int = _key(
        250, _non_negative_int, CommandLineOption("Characters a shortened result keeps")
    )
    compaction_notice_enabled: bool = _key(
        True,
        _boolean,
        CommandLineOption("Add the compaction notice (where: --notice-placement)", flag="--notice"),
    )
    compaction_notice_token_reserve: int = _key(
        800,
        _non_negative_int,
        CommandLineOption("Tokens held back for the compaction notice", flag="--notice-reserve"),
    )
    compaction_notice_verbosity: str = _key(
        "normal",
        _verbosity,
        CommandLineOption("Notice: minimal, normal or verbose", flag="--notice-verbosity"),
    )
    compaction_notice_min_level: int = _key(
        1,
        _any_int,
        CommandLineOption(
            "Lowest compaction level that adds the notice", flag="--notice-min-level"
        ),
    )
    compaction_map_share: float = _key(
        0.05,
        _share_or_zero,
        CommandLineOption(
            "Share of the budget the notice's map of left-out names may take (at most "
            f"{MAP_MOST_TOKENS:,} tokens; 0: no map)",
            flag="--map-share",
        ),
    )
    compaction_notice_placement: str = _key(
        "in_place",
        _placement,
        CommandLineOption("Notice: in_place or tail", flag="--notice-placement"),
    )
    output_reserve_fraction: float = _key(
        1.0,
        _share_or_zero,
        CommandLineOption(
            "Share of the output the provider asks for held back", flag="--output-reserve"
        ),
    )
    token_meter: str = _key("estimate", _meter_mode, CommandLineOption("estimate or actual"))
    max_tool_result_bytes: int = _key(
        131_072, _tool_result_bytes, CommandLineOption("Ingress cap on a tool result, bytes")
    )
    token_family: str | None = _key(
        None,
        _optional_family,
        CommandLineOption("o200k, claude3 or claude47", default_text="from --model"),
    )

    escalate_at_turn_start: bool = _key(
        True,
        _boolean,
        CommandLineOption("Escalate when a turn starts that would cross the trigger"),
    )
    cache_ttl_seconds: float = _key(
        300.0,
        _non_negative_number,
        CommandLineOption("Provider cache lifetime in seconds (0: never escalate on a cold cache)"),
    )
    cold_cache_distance: float = _key(
        0.15,
        _share_or_zero,
        CommandLineOption("Cold cache: escalate within this share of the budget of the trigger"),
    )

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> ContextConfig:
        """Validate a mount-config mapping; unknown keys are logged, not fatal."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise TypeError(f"context-simple config must be a mapping, got {type(raw).__name__}")
        checks: dict[str, _Check] = {f.name: f.metadata[_CHECK] for f in fields(cls)}
        unknown = [str(k) for k in raw if k not in checks]
        if unknown:
            # A mount config may carry keys meant for another context module (auto_compact):
            # named and ignored, never fatal. The constructor, called from code, raises.
            logger.warning("context-simple: ignoring %s", unknown_keys_text(unknown))
        values = {name: check(name, raw[name]) for name, check in checks.items() if name in raw}
        return cls(**values)

    @property
    def target_not_below_trigger(self) -> bool:
        """``target_usage`` at or above ``compact_threshold``: valid (the spec allows it), but
        a compaction then aims for a view no smaller than the one that started it."""
        return self.target_usage >= self.compact_threshold

    # The rules derived from the settings, in one place: the manager, the replay tool and the
    # benchmarks all call these, so none of them can drift from the others.

    @property
    def notice_reserve(self) -> int:
        """Tokens held back for the compaction notice: its reserve while the notice is on."""
        return self.compaction_notice_token_reserve if self.compaction_notice_enabled else 0

    def map_bound(self, effective: int) -> int:
        """Tokens the notice's map of left-out names may take for an ``effective`` budget:
        its share, and never more than ``MAP_MOST_TOKENS``."""
        if not self.compaction_notice_enabled:
            return 0
        return min(MAP_MOST_TOKENS, int(self.compaction_map_share * max(effective, 0)))

    def usable_budget(self, effective: int) -> int:
        """The part of the ``effective`` budget a view may fill: less the notice reserve."""
        reserve = self.notice_reserve
        # A reserve that would leave nothing is ignored rather than making every request fail.
        return effective - reserve if reserve < effective else effective

    def trigger(self, effective: int) -> float:
        """The view size at or above which compaction fires: ``compact_threshold`` of usable."""
        return self.compact_threshold * self.usable_budget(effective)

    def target(self, effective: int) -> int:
        """The view size compaction aims for: ``target_usage`` of the usable budget."""
        return int(self.target_usage * self.usable_budget(effective))


def warn_about_settings(config: ContextConfig) -> None:
    """Log the settings that are valid but do something a user would not mean."""
    if config.target_not_below_trigger:
        logger.warning(
            "context-simple: target_usage %s is not below compact_threshold %s: a "
            "compaction aims for a view no smaller than the one that starts it, so it "
            "reduces next to nothing",
            config.target_usage,
            config.compact_threshold,
        )
