"""Where the request budget comes from.

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

What a provider publishes is read by ``_provider_reads`` (never raising, each problem logged
once); how the budget is reported is ``_budget_record``'s and ``_budget_gate``'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

from ..vocabulary._numbers import is_int, is_number
from ._budget_gate import BudgetEventGate
from ._budget_record import Budget, BudgetSource, OutputSource
from ._provider_reads import (
    PROVIDER_WARNINGS,
    UNSENT_DEFAULT_OUTPUT,
    WarnOnce,
    call_optional,
    model_name_only,
    name_from,
    provider_info_name,
    publishes_unsent_output,
    read_field,
    warn_once,
)

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

# Headroom for what neither the estimate nor the readings see yet (request framing, estimator
# error before the first reading, rounding); a sixteenth of windows smaller than 64K.
SAFETY_MARGIN_TOKENS = 4096
#: A window with no output figure holds back a quarter of itself, at most this.
ASSUMED_OUTPUT_CAP = 32_768
#: Whatever the output figure, the input keeps at least this share of the window.
MIN_INPUT_SHARE = 0.25


def safety_margin(context_window: int) -> int:
    """The margin held back from ``context_window`` for what nothing measures yet."""
    return min(SAFETY_MARGIN_TOKENS, context_window // 16)


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
        name = await model_name_only(provider) if provider is not None else None
        tools, learned = held_back(name)
        return finish("explicit", token_budget, model_name=name, beside=(tools, max(0, learned)))

    if provider is None:
        return fallback(None)

    model_info = await call_optional(provider, "get_model_info")
    name = name_from(model_info, ("model", "name", "id"))
    window = _window_from(
        model_info, "get_model_info()", output_reserve_fraction, requested_output, trusted=True
    )
    if window is not None:
        return on_window("provider_model_info", window, name)

    provider_info = await call_optional(provider, "get_info")
    defaults = read_field(provider_info, "defaults")
    if name is None:
        name = provider_info_name(provider_info, defaults)
    window = _window_from(
        defaults,
        "get_info().defaults",
        output_reserve_fraction,
        requested_output,
        trusted=not publishes_unsent_output(provider, provider_info),
    )
    if window is not None:
        return on_window("provider_defaults", window, name)

    # The provider should publish its window; falling back here is its bug, so say so.
    warn_once(
        "Provider %s published no usable context window; using max_tokens_fallback=%d",
        type(provider).__name__,
        max_tokens_fallback,
    )
    return fallback(name)


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


def _is_positive_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass; True must not read as a one-token window.
    return is_int(value) and value > 0


def _require_positive_int(name: str, value: object) -> None:
    if not _is_positive_int(value):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _require_fraction(value: object) -> None:
    if not is_number(value) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"output_reserve_fraction must be a number from 0 to 1, got {value!r}")


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
    window = read_field(source, "context_window")
    max_output = read_field(source, "max_output_tokens")
    if window is None and max_output is None:
        return None  # this source simply does not publish a window
    if not _is_positive_int(window):
        warn_once("Ignoring %s: context_window=%r is not a positive integer", where, window)
        return None
    if max_output is not None and not _is_positive_int(max_output):
        warn_once(
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
    # Defaults are read as every other provider figure is: from a mapping or an attribute.
    sent = read_field(read_field(source, "defaults"), "max_tokens")
    if _is_positive_int(sent):
        return sent, "model_defaults"  # a ModelInfo's own defaults: what it sends
    sent = read_field(source, "max_tokens")
    if trusted and _is_positive_int(sent):
        return sent, "provider_defaults"
    if max_output is not None:
        return max_output, "max_output_tokens"
    return min(window // 4, ASSUMED_OUTPUT_CAP), "assumed"


def context_length_error(message: str) -> Exception:
    """The host's typed error when it is installed (it is provided at run time)."""
    try:
        from amplifier_core.llm_errors import ContextLengthError
    except ImportError:  # pragma: no cover - the host always ships it
        return RuntimeError(message)
    return ContextLengthError(message)
