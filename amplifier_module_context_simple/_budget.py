"""Where the request budget comes from, and how it is reported.

The budget is what the view (the messages this module hands out) may take of a request.
A provider checks the whole request, so the budget is the window less everything else the
request carries or asks for:

    input room = window - output held back - safety margin
    budget     = min(input room, max_tokens) - tool definitions - learned overhead

This amends the spec's ``window - 0.5 * max_output - 4096``, which covered neither the output
a provider really requests nor the tools the orchestrator sends with every request. The
configured ``max_tokens`` caps what the request's input may take ("compact as if the window
were this large"), so the tools and the overhead come off a cap too.

* **Output held back**: what the provider will put in ``max_tokens``, times
  ``output_reserve_fraction`` (default 1.0): the request's own ``max_output_tokens`` when the
  orchestrator names one; else the model's ``defaults["max_tokens"]`` in ``get_model_info()``;
  else, from ``get_info().defaults``, its ``max_tokens`` (unless the provider is one known to
  publish there a figure it does not send, see ``UNSENT_DEFAULT_OUTPUT``) or the model's
  ``max_output_tokens``. A window without any output figure holds back a quarter of itself, at
  most ``ASSUMED_OUTPUT_CAP``. Whatever is held back, the input keeps at least a quarter of the
  window, so a window too small for the formula still gets a budget inside it.
* **Safety margin**: ``SAFETY_MARGIN_TOKENS``, or a sixteenth of a smaller window: framing and
  estimator error before the provider's first reading.
* **Tool definitions**: the caller's estimate of the tools every request carries.
* **Learned overhead**: what the provider's readings showed beyond the view and the tools
  (hook injections, provider framing), never negative and at most the window.

Sources are tried in a fixed order and the first usable one answers:

1. an explicit ``token_budget`` from the caller (``explicit``), taken as the view's budget;
2. the provider's ``get_model_info()`` (``provider_model_info``);
3. the ``defaults`` of the provider's ``get_info()`` (``provider_defaults``);
4. the configured ``max_tokens_fallback`` (``max_tokens_fallback``), only when no window is
   published at all, taken as the request's input (tools and overhead come off it).

A source that is missing, raises or publishes unusable values is skipped with a log line, so
a misbehaving provider can never fail a request here. When the overhead alone leaves the view
no room the budget is one token and ``Budget.starved`` says so: the caller warns or fails.

``BudgetEventGate`` remembers the last payload the caller emitted so the budget event
is only sent when the number (or one of its parts) actually changes.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ._budget_record import Budget, BudgetSource, OutputSource
from ._numbers import is_int, is_number

__all__ = [
    "ASSUMED_OUTPUT_CAP",
    "MIN_INPUT_SHARE",
    "PROVIDER_WARNINGS",
    "SAFETY_MARGIN_TOKENS",
    "UNSENT_DEFAULT_OUTPUT",
    "Budget",
    "BudgetEventGate",
    "BudgetSource",
    "OutputSource",
    "WarnOnce",
    "context_length_error",
    "derive_budget",
    "safety_margin",
]

logger = logging.getLogger(__name__)

# Headroom for what neither the estimate nor the readings see yet (request framing, estimator
# error before the first reading, rounding); a sixteenth of windows smaller than 64K.
SAFETY_MARGIN_TOKENS = 4096
#: Provider ids whose ``get_info().defaults["max_tokens"]`` is not what they send: Amplifier's
#: Anthropic provider publishes 4096 there and sends the model's whole max output.
UNSENT_DEFAULT_OUTPUT: frozenset[str] = frozenset({"anthropic"})
#: A window with no output figure holds back a quarter of itself, at most this.
ASSUMED_OUTPUT_CAP = 32_768
#: Whatever the output figure, the input keeps at least this share of the window.
MIN_INPUT_SHARE = 0.25


# derive_budget runs before every request, so a provider that is broken stays broken for
# the whole session. Each distinct problem is logged once at WARNING, then at DEBUG.
_WARNED_LIMIT = 256


def safety_margin(context_window: int) -> int:
    """The margin held back from ``context_window`` for what nothing measures yet."""
    return min(SAFETY_MARGIN_TOKENS, context_window // 16)


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


HeldBack = Callable[[str | None], tuple[int, int]]
"""For a model name: (tool definition tokens, learned overhead tokens) to hold back."""


def _nothing_held(_model: str | None) -> tuple[int, int]:
    return 0, 0


async def derive_budget(
    *,
    token_budget: int | None,
    provider: object | None,
    max_tokens: int | None,
    max_tokens_fallback: int,
    output_reserve_fraction: float,
    requested_output: int | None = None,
    held_back: HeldBack = _nothing_held,
) -> Budget:
    """Work out the effective budget for one request.

    ``requested_output`` is the request's own ``max_output_tokens`` when the orchestrator
    names one. ``held_back`` gives, for the model name, what the request carries besides the
    view (tool definitions, learned overhead); it comes off a window's room and off the
    fallback, never off an explicit ``token_budget`` (the caller's budget for the view).
    Raises ``ValueError`` only for caller bugs (an invalid explicit budget or invalid
    configuration values); provider problems are logged and skipped.
    """
    _require_positive_int("max_tokens_fallback", max_tokens_fallback)
    if max_tokens is not None:
        _require_positive_int("max_tokens", max_tokens)
    if requested_output is not None:
        _require_positive_int("max_output_tokens", requested_output)
    _require_fraction(output_reserve_fraction)

    def finish(
        source: BudgetSource,
        room: int,
        window: _Window | None = None,
        model_name: str | None = None,
        held: tuple[int, int] = (0, 0),
        beside: tuple[int, int] = (0, 0),
    ) -> Budget:
        # ``room`` is what the request's input may take (the explicit or fallback budget
        # itself); ``max_tokens`` caps that, and what the request carries besides the view
        # comes off both (``held``) - or, for an explicit budget, adds to what the whole
        # request may take (``beside``).
        aside, extra = held[0] + held[1], beside[0] + beside[1]
        capped = max_tokens is not None and max_tokens < room
        allowed = min(room, max_tokens) if max_tokens is not None else room
        return Budget(
            source=source,
            context_window=window.context_window if window else None,
            max_output_tokens=window.max_output_tokens if window else None,
            reserved_output=window.reserved_output if window else None,
            derived_budget=max(room - aside, 1),
            max_tokens=max_tokens,
            max_tokens_fallback=max_tokens_fallback,
            capped=capped,
            effective_budget=max(allowed - aside, 1),
            model_name=model_name,
            requested_output=window.requested_output if window else None,
            output_source=window.output_source if window else None,
            margin=window.margin if window else 0,
            tool_definitions_tokens=held[0],
            learned_overhead_tokens=held[1],
            starved=allowed - aside <= 0,
            request_budget=allowed + extra,
            carried_tools=held[0] + beside[0],
            input_room=room + extra,
        )

    def on_window(source: BudgetSource, window: _Window, name: str | None) -> Budget:
        tools, learned = held_back(name)
        learned = min(max(0, learned), window.context_window)
        return finish(source, window.input_limit, window, name, (tools, learned))

    def fallback(name: str | None) -> Budget:
        # A guess for the whole input, like a window's room: what the request carries
        # besides the view comes off it too.
        tools, learned = held_back(name)
        held = (tools, min(max(0, learned), max_tokens_fallback))
        return finish("max_tokens_fallback", max_tokens_fallback, model_name=name, held=held)

    if token_budget is not None:
        _require_positive_int("token_budget", token_budget)
        name = await _model_name_only(provider) if provider is not None else None
        tools, learned = held_back(name)
        return finish("explicit", token_budget, model_name=name, beside=(tools, max(0, learned)))

    if provider is None:
        return fallback(None)

    model_info = await _call_optional(provider, "get_model_info")
    name = _name_from(model_info, ("model", "name", "id"))
    window = _window_from(
        model_info, "get_model_info()", output_reserve_fraction, requested_output, trusted=True
    )
    if window is not None:
        return on_window("provider_model_info", window, name)

    provider_info = await _call_optional(provider, "get_info")
    defaults = _field(provider_info, "defaults")
    if name is None:
        name = _provider_info_name(provider_info, defaults)
    window = _window_from(
        defaults,
        "get_info().defaults",
        output_reserve_fraction,
        requested_output,
        trusted=not _publishes_unsent_output(provider, provider_info),
    )
    if window is not None:
        return on_window("provider_defaults", window, name)

    # The provider should publish its window; falling back here is its bug, so say so.
    _warn(
        "Provider %s published no usable context window; using max_tokens_fallback=%d",
        type(provider).__name__,
        max_tokens_fallback,
    )
    return fallback(name)


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
    max_output_tokens: int | None
    requested_output: int
    output_source: OutputSource
    reserved_output: int
    margin: int
    input_limit: int
    """What the whole input may take: the window less the held-back output and the margin."""


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


def _window_from(
    source: object,
    where: str,
    fraction: float,
    requested: int | None,
    *,
    trusted: bool,
) -> _Window | None:
    """The window ``source`` publishes, with the output held back from it.

    ``trusted``: whether the source's ``max_tokens`` is what the provider really sends.
    """
    if source is None:
        return None
    window = _field(source, "context_window")
    max_output = _field(source, "max_output_tokens")
    if window is None and max_output is None:
        return None  # this source simply does not publish a window
    if not _is_positive_int(window):
        _warn("Ignoring %s: context_window=%r is not a positive integer", where, window)
        return None
    if max_output is not None and not _is_positive_int(max_output):
        _warn(
            "Ignoring %s's max_output_tokens=%r (not a positive integer); holding back an "
            "assumed output",
            where,
            max_output,
        )
        max_output = None
    output, output_source = _output_figure(source, max_output, window, requested, trusted)
    margin = safety_margin(window)
    reserved = math.ceil(output * fraction)
    # However large the output figure, the input keeps a share of the window: a provider
    # that really sends its whole window as max_tokens refuses everything anyway.
    floor = math.ceil(window * MIN_INPUT_SHARE)
    reserved = max(0, min(reserved, window - margin - floor))
    return _Window(
        context_window=window,
        max_output_tokens=max_output,
        requested_output=output,
        output_source=output_source,
        reserved_output=reserved,
        margin=margin,
        input_limit=window - reserved - margin,
    )


def _output_figure(
    source: object, max_output: int | None, window: int, requested: int | None, trusted: bool
) -> tuple[int, OutputSource]:
    """What the provider will ask for as output, and where that figure came from."""
    if requested is not None:
        return requested, "request"
    defaults = _field(source, "defaults")
    sent = _field(defaults, "max_tokens") if isinstance(defaults, Mapping) else None
    if _is_positive_int(sent):
        return sent, "model_defaults"  # a ModelInfo's own defaults: what it sends
    sent = _field(source, "max_tokens")
    if trusted and _is_positive_int(sent):
        return sent, "provider_defaults"
    if max_output is not None:
        return max_output, "max_output_tokens"
    return min(window // 4, ASSUMED_OUTPUT_CAP), "assumed"


def _publishes_unsent_output(provider: object, provider_info: object) -> bool:
    names = (_field(provider_info, "id"), _field(provider, "name"))
    return any(isinstance(n, str) and n.strip().lower() in UNSENT_DEFAULT_OUTPUT for n in names)


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
