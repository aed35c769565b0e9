"""The counted envelopes of the measured path: what ``count_view`` and ``fit_output`` return.

An envelope carries the hard-safety figures (``estimated_input_tokens``,
``input_limit_tokens``) and, when the provider counted the request, a measurement. A
malformed envelope is the orchestrator's bug and raises ``TypeError`` naming what is wrong; a
request known to be over the provider's hard limit never goes out (``fail_closed``).
"""

from __future__ import annotations

__all__ = [
    "NOT_COUNTED",
    "Counted",
    "FitOutput",
    "Measurement",
    "decision_figures",
    "fail_closed",
    "fit",
    "fitted_figures",
    "read_counted",
    "read_envelope",
    "read_fitted",
    "unusable_reason",
]

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..vocabulary._numbers import is_int
from ._budget import context_length_error

FitOutput = Callable[[list[dict[str, Any]], Mapping[str, Any]], Awaitable[Mapping[str, Any] | None]]
"""The orchestrator's ``fit_output(view, attempt)``: a newly counted envelope, or ``None``."""
NOT_COUNTED = "not counted ('budget_decision' is None)"
"""Why an envelope without a decision carries no usable count."""


@dataclass(frozen=True, slots=True)
class Measurement:
    source: str
    input_tokens: int
    estimated_input_tokens: int
    input_limit_tokens: int

    @property
    def over_limit(self) -> bool:
        return self.estimated_input_tokens > self.input_limit_tokens

    def figures(self) -> tuple[int, int, int, str]:
        """``(count, estimate, limit, source)``: the shape the subclass surface hands out."""
        return (
            self.input_tokens,
            self.estimated_input_tokens,
            self.input_limit_tokens,
            self.source,
        )


@dataclass(frozen=True, slots=True)
class Counted:
    """What a counted envelope says: the hard-safety figures, and a usable count if any."""

    estimated_input_tokens: int
    input_limit_tokens: int
    measurement: Measurement | None
    problem: str | None = None
    """Why ``measurement`` is None: the first rule the envelope's measurement broke."""

    @property
    def over_limit(self) -> bool:
        return self.estimated_input_tokens > self.input_limit_tokens


def _is_count(value: object) -> bool:
    return is_int(value) and value >= 0


def read_counted(envelope: object, *, what: str = "count_view") -> Counted | None:
    """Validate a counted envelope; None when it was not counted (``budget_decision: None``).

    A malformed envelope is the orchestrator's bug and raises ``TypeError`` naming what is
    wrong; the hard-safety fields (``estimated_input_tokens``, ``input_limit_tokens``) must
    be non-negative ints. A well-formed one without a usable provider count has
    ``measurement`` None.
    """
    if not isinstance(envelope, Mapping) or "dispatch" not in envelope:
        raise TypeError(f"{what} must return a mapping with 'dispatch' and 'budget_decision'")
    if "budget_decision" not in envelope:
        raise TypeError(f"{what} result lacks 'budget_decision' (use None when not counted)")
    decision = envelope["budget_decision"]
    if decision is None:
        return None
    if not isinstance(decision, Mapping):
        raise TypeError(f"{what}: 'budget_decision' must be a mapping or None")
    for key in ("estimated_input_tokens", "input_limit_tokens", "measurement"):
        if key not in decision:
            raise TypeError(f"{what}: 'budget_decision' lacks {key!r}")
    estimated, limit = decision["estimated_input_tokens"], decision["input_limit_tokens"]
    for key, value in (("estimated_input_tokens", estimated), ("input_limit_tokens", limit)):
        if not _is_count(value):
            raise TypeError(
                f"{what}: 'budget_decision' field {key!r} must be a non-negative int, got {value!r}"
            )
    measurement = decision["measurement"]
    # Anything but a provider count in the expected shape is an unusable measurement (the
    # reference's reading), never an error: only the hard-safety fields are strict.
    problem = _measurement_problem(measurement, estimated)  # type: ignore[arg-type]
    if problem is not None:
        return Counted(estimated, limit, None, problem)  # type: ignore[arg-type]
    assert isinstance(measurement, Mapping)
    usable = Measurement(measurement["source"], measurement["input_tokens"], estimated, limit)  # type: ignore[arg-type]
    return Counted(estimated, limit, usable)  # type: ignore[arg-type]


def _measurement_problem(measurement: object, estimated: int) -> str | None:
    """The first rule of a usable measurement that ``measurement`` breaks, or None."""
    if measurement is None:
        return "'measurement' is None (the provider did not count the request)"
    if not isinstance(measurement, Mapping):
        return f"'measurement' is a {type(measurement).__name__}, not a mapping"
    kind = measurement.get("kind")  # type: ignore[union-attr]
    if kind != "provider_count":
        return f"measurement 'kind' is {kind!r}, not 'provider_count'"
    source = measurement.get("source")  # type: ignore[union-attr]
    if not isinstance(source, str) or not source:
        return f"measurement 'source' must be a non-empty string, got {source!r}"
    tokens = measurement.get("input_tokens")  # type: ignore[union-attr]
    if not _is_count(tokens):
        return f"measurement 'input_tokens' must be a non-negative int, got {tokens!r}"
    if estimated < tokens:  # type: ignore[operator]
        return (
            f"'estimated_input_tokens' ({estimated}) is below the measured 'input_tokens' "
            f"({tokens}): the hard-safety estimate must cover the count"
        )
    return None


def unusable_reason(envelope: Mapping[str, Any]) -> str | None:
    """Why a well-formed counted envelope carries no usable count (None: it does)."""
    counted = read_counted(envelope)
    return NOT_COUNTED if counted is None else counted.problem


def read_envelope(envelope: object, *, what: str = "count_view") -> Measurement | None:
    """The usable provider measurement of a counted envelope, or None (see ``read_counted``)."""
    counted = read_counted(envelope, what=what)
    return None if counted is None else counted.measurement


def fail_closed(counted: Counted | None) -> None:
    """A known request over the provider's hard limit never goes out, measured or not."""
    if counted is not None and counted.over_limit:
        raise context_length_error(
            f"context-simple: the request is ~{counted.estimated_input_tokens} input tokens "
            f"and the provider's limit is {counted.input_limit_tokens}; refusing to dispatch "
            "it - shorten the system prompt, the first or latest prompt, or the retained "
            "reminders"
        )


async def fit(
    fit_output: FitOutput, view: list[dict[str, Any]], attempt: Mapping[str, Any]
) -> tuple[Mapping[str, Any], Measurement, int] | None:
    """Ask the orchestrator's ``fit_output`` for a smaller output allowance: ``None`` when it
    has none, else its envelope, the measurement and the count calls it made (``read_fitted``
    validates them, and refuses an envelope still over the limit)."""
    relief = await fit_output(view, attempt)
    if relief is None:
        return None
    return relief, read_fitted(relief), relief.get("count_calls")  # type: ignore[return-value]


def read_fitted(relief: Mapping[str, Any]) -> Measurement:
    reading = read_envelope(relief, what="fit_output")
    calls = relief.get("count_calls")
    if not (is_int(calls) and calls > 0):
        raise TypeError("fit_output result needs a positive int 'count_calls'")
    if reading is None:
        raise TypeError("fit_output result carries no usable provider measurement")
    if reading.over_limit:
        raise context_length_error(
            "context-simple: even with a smaller output allowance the request exceeds the "
            f"provider's input limit ({reading.estimated_input_tokens} > "
            f"{reading.input_limit_tokens})"
        )
    return reading


def decision_figures(envelope: object) -> tuple[int, int, int, str] | None:
    """``(count, estimate, limit, source)`` of a counted envelope, as the measured path reads
    it: ``None`` without a usable ``provider_count`` measurement (or a ``budget_decision`` of
    ``None``); a malformed envelope raises ``TypeError`` naming what is wrong."""
    reading = read_envelope(envelope)
    return None if reading is None else reading.figures()


async def fitted_figures(
    fit_output: FitOutput, view: list[dict[str, Any]], attempt: Mapping[str, Any]
) -> tuple[Mapping[str, Any], tuple[int, int, int, str], int] | None:
    """Await ``fit_output(view, attempt)`` and validate its envelope as the measured path
    does: ``(envelope, (count, estimate, limit, source), count_calls)``, ``None`` when the
    orchestrator has no smaller output; ``TypeError`` for a malformed envelope and
    ``ContextLengthError`` for one still over the limit."""
    fitted = await fit(fit_output, view, attempt)
    if fitted is None:
        return None
    envelope, reading, calls = fitted
    return envelope, reading.figures(), calls
