"""Configuration: one frozen, validated record built from the mount config.

Every key has a default, a rule, and an error that names the key, the rule and the value that
was received. Two keys (``max_tokens`` and ``token_meter``) warn and fall back instead of
raising, because the module's published contract has always treated them that way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ._estimate import FAMILIES
from ._ingress import MIN_TOOL_RESULT_BYTES
from ._numbers import is_int, is_number

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

_Check = Callable[[str, object], Any]
"""A key's rule: the validated value for ``(key, raw value)``, or a ``ValueError``."""
_CHECK = "check"


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


def _fraction(*, allow_zero: bool) -> Callable[[str, object], float]:
    rule = "a number with 0 <= x <= 1" if allow_zero else "a number with 0 < x <= 1"

    def check(key: str, value: object) -> float:
        if not is_number(value):
            raise _fail(key, rule, value)
        number = float(value)
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

    Each field is one key: its default, and under ``metadata[_CHECK]`` the rule that validates
    a mount-config value for it. Adding a key is adding a field (and its test).
    """

    max_tokens: int | None = field(default=None, metadata={_CHECK: _max_tokens_cap})
    max_tokens_fallback: int = field(default=200_000, metadata={_CHECK: _positive_int})
    compact_threshold: float = field(default=0.92, metadata={_CHECK: _fraction(allow_zero=False)})
    target_usage: float = field(default=0.50, metadata={_CHECK: _fraction(allow_zero=False)})
    protected_recent: float = field(default=0.30, metadata={_CHECK: _fraction(allow_zero=True)})
    protected_tool_results: int = field(default=5, metadata={_CHECK: _non_negative_int})
    truncate_chars: int = field(default=250, metadata={_CHECK: _non_negative_int})
    compaction_notice_enabled: bool = field(default=True, metadata={_CHECK: _boolean})
    compaction_notice_token_reserve: int = field(default=800, metadata={_CHECK: _non_negative_int})
    compaction_notice_verbosity: str = field(
        default="normal", metadata={_CHECK: _one_of(NOTICE_VERBOSITIES)}
    )
    compaction_notice_min_level: int = field(default=1, metadata={_CHECK: _any_int})
    output_reserve_fraction: float = field(
        default=0.5, metadata={_CHECK: _fraction(allow_zero=True)}
    )
    token_meter: str = field(default="estimate", metadata={_CHECK: _meter_mode})
    max_tool_result_bytes: int = field(default=131_072, metadata={_CHECK: _tool_result_bytes})
    token_family: str | None = field(default=None, metadata={_CHECK: _optional_family})

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> ContextConfig:
        """Validate a mount-config mapping; unknown keys are logged, not fatal."""
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise TypeError(f"context-simple config must be a mapping, got {type(raw).__name__}")
        checks: dict[str, _Check] = {f.name: f.metadata[_CHECK] for f in fields(cls)}
        known = set(checks)
        unknown = sorted(str(k) for k in raw if k not in known)
        if unknown:
            logger.warning(
                "context-simple: ignoring unknown config key(s) %s; known keys are %s",
                ", ".join(unknown),
                ", ".join(sorted(known)),
            )
        values = {name: check(name, raw[name]) for name, check in checks.items() if name in raw}
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
