"""Where the request budget comes from, and how it is reported.

``derive_budget`` turns "what does this provider offer?" into one number plus its
provenance. Sources are tried in a fixed order and the first usable one answers:

1. an explicit ``token_budget`` from the caller (``explicit``);
2. the provider's ``get_model_info()`` (``provider_model_info``);
3. the ``defaults`` of the provider's ``get_info()`` (``provider_defaults``);
4. the configured ``max_tokens_fallback`` (``max_tokens_fallback``).

A provider source needs both ``context_window`` and ``max_output_tokens`` as positive
ints; its budget is the window minus the reserved share of the output limit minus a fixed
safety margin. A source that is missing, raises, publishes unusable values or yields a
non-positive budget is skipped with a log line, so a misbehaving provider can never fail
a request here. The configured ``max_tokens`` then caps the result on every path.

``BudgetEventGate`` remembers the last payload the caller emitted so the budget event
is only sent when the number (or its provenance) actually changes.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from ._numbers import is_int, is_number

__all__ = [
    "PROVIDER_WARNINGS",
    "SAFETY_MARGIN_TOKENS",
    "Budget",
    "BudgetEventGate",
    "BudgetSource",
    "WarnOnce",
    "context_length_error",
    "derive_budget",
]

logger = logging.getLogger(__name__)

BudgetSource = Literal[
    "explicit", "provider_model_info", "provider_defaults", "max_tokens_fallback"
]

# Headroom for what the estimate does not see (request framing, tool schemas, rounding).
SAFETY_MARGIN_TOKENS = 4096

_PROVIDER_SOURCES: frozenset[str] = frozenset({"provider_model_info", "provider_defaults"})

# derive_budget runs before every request, so a provider that is broken stays broken for
# the whole session. Each distinct problem is logged once at WARNING, then at DEBUG.
_WARNED_LIMIT = 256


class WarnOnce:
    """The distinct problems already logged at WARNING (bounded; ``clear`` starts over)."""

    def __init__(self, limit: int = _WARNED_LIMIT) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def first(self, text: str) -> bool:
        """Whether ``text`` is new (and remember it while there is room)."""
        if text in self._seen:
            return False
        if len(self._seen) < self._limit:
            self._seen.add(text)
        return True

    def clear(self) -> None:
        self._seen.clear()


PROVIDER_WARNINGS = WarnOnce()
"""Shared by every manager of the process: one broken provider is one warning."""


@dataclass(frozen=True)
class Budget:
    """The budget a request runs on, with enough provenance to explain it."""

    source: BudgetSource
    context_window: int | None
    max_output_tokens: int | None
    reserved_output: int | None
    derived_budget: int
    max_tokens: int | None
    max_tokens_fallback: int
    capped: bool
    effective_budget: int
    # Best-effort model identity for callers that tune by model family; not reported.
    model_name: str | None = None

    def payload(self) -> dict[str, Any]:
        """Return the JSON-safe ``context:budget`` event payload.

        The window fields only appear when a provider supplied them.
        """
        payload: dict[str, Any] = {"source": self.source}
        if self.source in _PROVIDER_SOURCES:
            payload["context_window"] = self.context_window
            payload["max_output_tokens"] = self.max_output_tokens
            payload["reserved_output"] = self.reserved_output
        payload.update(
            derived_budget=self.derived_budget,
            max_tokens=self.max_tokens,
            max_tokens_fallback=self.max_tokens_fallback,
            capped=self.capped,
            effective_budget=self.effective_budget,
        )
        return payload


async def derive_budget(
    *,
    token_budget: int | None,
    provider: object | None,
    max_tokens: int | None,
    max_tokens_fallback: int,
    output_reserve_fraction: float,
) -> Budget:
    """Work out the effective budget for one request.

    Raises ``ValueError`` only for caller bugs (an invalid explicit budget or invalid
    configuration values); provider problems are logged and skipped.
    """
    _require_positive_int("max_tokens_fallback", max_tokens_fallback)
    if max_tokens is not None:
        _require_positive_int("max_tokens", max_tokens)
    _require_fraction(output_reserve_fraction)

    def finish(
        source: BudgetSource,
        derived: int,
        window: _Window | None = None,
        model_name: str | None = None,
    ) -> Budget:
        capped = max_tokens is not None and max_tokens < derived
        return Budget(
            source=source,
            context_window=window.context_window if window else None,
            max_output_tokens=window.max_output_tokens if window else None,
            reserved_output=window.reserved_output if window else None,
            derived_budget=derived,
            max_tokens=max_tokens,
            max_tokens_fallback=max_tokens_fallback,
            capped=capped,
            effective_budget=min(derived, max_tokens) if max_tokens is not None else derived,
            model_name=model_name,
        )

    if token_budget is not None:
        _require_positive_int("token_budget", token_budget)
        name = await _model_name_only(provider) if provider is not None else None
        return finish("explicit", token_budget, model_name=name)

    if provider is None:
        return finish("max_tokens_fallback", max_tokens_fallback)

    model_info = await _call_optional(provider, "get_model_info")
    name = _name_from(model_info, ("model", "name", "id"))
    window = _window_from(model_info, "get_model_info()", output_reserve_fraction)
    if window is not None:
        return finish("provider_model_info", window.budget, window, name)

    provider_info = await _call_optional(provider, "get_info")
    defaults = _field(provider_info, "defaults")
    if name is None:
        name = _provider_info_name(provider_info, defaults)
    window = _window_from(defaults, "get_info().defaults", output_reserve_fraction)
    if window is not None:
        return finish("provider_defaults", window.budget, window, name)

    # The provider should publish its window; falling back here is its bug, so say so.
    _warn(
        "Provider %s published no usable context window; using max_tokens_fallback=%d",
        type(provider).__name__,
        max_tokens_fallback,
    )
    return finish("max_tokens_fallback", max_tokens_fallback, model_name=name)


class BudgetEventGate:
    """Remembers the last emitted budget payload so repeats are not re-emitted.

    The caller asks ``changed()``, calls ``mark_emitted()`` before the emit's first await (so
    concurrent requests deliver one event per change) and ``restore()``s the ``snapshot()``
    taken before it when the emit fails.
    """

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    @property
    def last(self) -> dict[str, Any] | None:
        """A copy of the last emitted payload, or ``None``."""
        return dict(self._last) if self._last is not None else None

    def changed(self, payload: Mapping[str, Any]) -> bool:
        """True when ``payload`` differs from the last one emitted."""
        return self._last is None or dict(payload) != self._last

    def mark_emitted(self, payload: Mapping[str, Any]) -> None:
        """Record ``payload`` as emitted (copied, so later edits to it do not leak in)."""
        self._last = dict(payload)

    def snapshot(self) -> dict[str, Any] | None:
        """Capture the gate's state for a later ``restore``."""
        return self.last

    def restore(self, snapshot: dict[str, Any] | None) -> None:
        """Return to a state captured by ``snapshot``."""
        self._last = dict(snapshot) if snapshot is not None else None

    def reset(self) -> None:
        """Forget what was emitted, so the next payload counts as a change."""
        self._last = None


# --- internals ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    context_window: int
    max_output_tokens: int
    reserved_output: int
    budget: int


def _warn(message: str, *args: object) -> None:
    text = message % args
    if not PROVIDER_WARNINGS.first(text):
        logger.debug("%s", text)
        return
    logger.warning("%s", text)


def _is_positive_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass; True must not read as a one-token window.
    return is_int(value) and value > 0


def _require_positive_int(name: str, value: object) -> None:
    if not _is_positive_int(value):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _require_fraction(value: object) -> None:
    if not is_number(value) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"output_reserve_fraction must be a number from 0 to 1, got {value!r}")


def _field(source: object, key: str) -> object:
    """Read ``key`` from a mapping or an attribute-bearing object, never raising."""
    if source is None:
        return None
    try:
        if isinstance(source, Mapping):
            return source.get(key)
        return getattr(source, key, None)
    except Exception:  # a property that raises is just a missing value here
        logger.debug("Reading %r from %s failed", key, type(source).__name__, exc_info=True)
        return None


async def _call_optional(provider: object, method_name: str, *, quiet: bool = False) -> object:
    """Call an optional, sync-or-async provider method; ``None`` if absent or failing."""
    method = _field(provider, method_name)
    if not callable(method):
        return None
    try:
        result = method()
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:
        if quiet:
            logger.debug("Provider %s() failed", method_name, exc_info=True)
            return None
        _warn(
            "Provider %s.%s() failed (%s: %s); trying the next budget source",
            type(provider).__name__,
            method_name,
            type(exc).__name__,
            exc,
        )
        return None


def _window_from(source: object, where: str, fraction: float) -> _Window | None:
    if source is None:
        return None
    window = _field(source, "context_window")
    max_output = _field(source, "max_output_tokens")
    if window is None and max_output is None:
        return None  # this source simply does not publish a window
    if not (_is_positive_int(window) and _is_positive_int(max_output)):
        # Both are needed for the formula; guessing the output share could overflow.
        _warn(
            "Ignoring %s: context_window=%r and max_output_tokens=%r must both be "
            "positive integers",
            where,
            window,
            max_output,
        )
        return None
    reserved = int(max_output * fraction)
    budget = window - reserved - SAFETY_MARGIN_TOKENS
    if budget <= 0:
        _warn(
            "Ignoring %s: context_window=%d leaves no budget after reserving %d output "
            "tokens and a %d-token margin",
            where,
            window,
            reserved,
            SAFETY_MARGIN_TOKENS,
        )
        return None
    return _Window(window, max_output, reserved, budget)


def _name_from(source: object, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = _field(source, key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _provider_info_name(provider_info: object, defaults: object) -> str | None:
    return (
        _name_from(provider_info, ("model",))
        or _name_from(defaults, ("model",))
        or _name_from(provider_info, ("name", "id"))
    )


async def _model_name_only(provider: object) -> str | None:
    """Best-effort model name when the budget itself came from elsewhere."""
    try:
        model_info = await _call_optional(provider, "get_model_info", quiet=True)
        name = _name_from(model_info, ("model", "name", "id"))
        if name is None:
            info = await _call_optional(provider, "get_info", quiet=True)
            name = _provider_info_name(info, _field(info, "defaults"))
        return name
    except Exception:  # never let a name lookup fail a request
        logger.debug("Model name lookup failed", exc_info=True)
        return None


def context_length_error(message: str) -> Exception:
    """The host's typed error when it is installed (it is provided at run time)."""
    try:
        from amplifier_core.llm_errors import ContextLengthError
    except ImportError:  # pragma: no cover - the host always ships it
        return RuntimeError(message)
    return ContextLengthError(message)
