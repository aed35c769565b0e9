"""Configuration: one frozen, validated record built from the mount config.

Every key has a default, a rule, and an error that names the key, the rule and the value that
was received. Two keys (``max_tokens`` and ``token_meter``) warn and fall back instead of
raising, because the module's published contract has always treated them that way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._estimate import FAMILIES
from ._ingress import MIN_TOOL_RESULT_BYTES

# Exports the validated settings record and the choices its keys accept.
__all__ = [
    "MIN_TOOL_RESULT_BYTES",
    "NOTICE_VERBOSITIES",
    "TOKEN_FAMILIES",
    "TOKEN_METER_MODES",
    "ContextConfig",
]

logger = logging.getLogger(__name__)

NOTICE_VERBOSITIES = ("minimal", "normal", "verbose")
TOKEN_METER_MODES = ("estimate", "actual")
TOKEN_FAMILIES = FAMILIES
"""The tokenizer families ``token_family`` accepts: the estimator's."""


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """The validated settings of one context manager."""

    max_tokens: int | None = None
    max_tokens_fallback: int = 200_000
    compact_threshold: float = 0.92
    target_usage: float = 0.50
    protected_recent: float = 0.30
    protected_tool_results: int = 5
    truncate_chars: int = 250
    compaction_notice_enabled: bool = True
    compaction_notice_token_reserve: int = 800
    compaction_notice_verbosity: str = "normal"
    compaction_notice_min_level: int = 1
    output_reserve_fraction: float = 0.5
    token_meter: str = "estimate"
    max_tool_result_bytes: int = 131_072
    token_family: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> ContextConfig:
        """Validate a mount-config mapping; unknown keys are logged, not fatal."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise TypeError(f"context-simple config must be a mapping, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in raw if k not in known)
        if unknown:
            logger.warning(
                "context-simple: ignoring unknown config key(s) %s; known keys are %s",
                ", ".join(unknown),
                ", ".join(sorted(known)),
            )
        values = {name: _VALIDATORS[name](name, raw[name]) for name in known if name in raw}
        return cls(**values)

    # The rules derived from the settings, in one place: the manager, the replay tool and the
    # benchmarks all call these, so none of them can drift from the others.

    @property
    def notice_reserve(self) -> int:
        """Tokens held back for the compaction notice: its reserve while the notice is on."""
        return self.compaction_notice_token_reserve if self.compaction_notice_enabled else 0

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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fail(key: str, rule: str, value: object) -> ValueError:
    return ValueError(f"context-simple config {key!r} must be {rule}; got {value!r}")


def _positive_int(key: str, value: object) -> int:
    if not _is_int(value) or value <= 0:  # type: ignore[operator]
        raise _fail(key, "a positive integer", value)
    return value  # type: ignore[return-value]


def _non_negative_int(key: str, value: object) -> int:
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise _fail(key, "an integer >= 0", value)
    return value  # type: ignore[return-value]


def _any_int(key: str, value: object) -> int:
    if not _is_int(value):
        raise _fail(key, "an integer", value)
    return value  # type: ignore[return-value]


def _fraction(*, allow_zero: bool) -> Callable[[str, object], float]:
    rule = "a number with 0 <= x <= 1" if allow_zero else "a number with 0 < x <= 1"

    def check(key: str, value: object) -> float:
        if not _is_number(value):
            raise _fail(key, rule, value)
        number = float(value)  # type: ignore[arg-type]
        low_ok = number >= 0 if allow_zero else number > 0
        if not (low_ok and number <= 1):
            raise _fail(key, rule, value)
        return number

    return check


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, "true or false", value)
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[str, object], str]:
    def check(key: str, value: object) -> str:
        if value not in choices:
            raise _fail(key, "one of " + ", ".join(repr(c) for c in choices), value)
        return value  # type: ignore[return-value]

    return check


def _optional_family(key: str, value: object) -> str | None:
    if value is None:
        return None
    return _one_of(TOKEN_FAMILIES)(key, value)


def _max_tokens_cap(key: str, value: object) -> int | None:
    # A bad cap must never make a session fail to start: the contract is "warn, no cap".
    if value is None:
        return None
    if _is_int(value) and value > 0:  # type: ignore[operator]
        return value  # type: ignore[return-value]
    logger.warning(
        "context-simple: %s=%r is not a positive integer; running with no cap", key, value
    )
    return None


def _meter_mode(key: str, value: object) -> str:
    if value in TOKEN_METER_MODES:
        return value  # type: ignore[return-value]
    logger.warning(
        "context-simple: %s=%r is not 'estimate' or 'actual'; using 'estimate'", key, value
    )
    return "estimate"


def _tool_result_bytes(key: str, value: object) -> int:
    if not _is_int(value) or value < MIN_TOOL_RESULT_BYTES:  # type: ignore[operator]
        raise _fail(key, f"an integer >= {MIN_TOOL_RESULT_BYTES} (room for the marker)", value)
    return value  # type: ignore[return-value]


_VALIDATORS: dict[str, Callable[[str, object], Any]] = {
    "max_tokens": _max_tokens_cap,
    "max_tokens_fallback": _positive_int,
    "compact_threshold": _fraction(allow_zero=False),
    "target_usage": _fraction(allow_zero=False),
    "protected_recent": _fraction(allow_zero=True),
    "protected_tool_results": _non_negative_int,
    "truncate_chars": _non_negative_int,
    "compaction_notice_enabled": _boolean,
    "compaction_notice_token_reserve": _non_negative_int,
    "compaction_notice_verbosity": _one_of(NOTICE_VERBOSITIES),
    "compaction_notice_min_level": _any_int,
    "output_reserve_fraction": _fraction(allow_zero=True),
    "token_meter": _meter_mode,
    "max_tool_result_bytes": _tool_result_bytes,
    "token_family": _optional_family,
}
