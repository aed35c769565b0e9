"""Real-usage token meter: what the provider says the last request cost.

The request path sizes views with a cheap character-based estimator. That estimator
has never been checked against what providers actually bill, and can be far off. This
module listens on the host's ``llm:response`` event and keeps the provider's own figure
for the request that was just answered, so that:

* the drift between estimate and reality is always visible (``MeterStats``), in every
  ``token_meter`` mode, and
* ``token_meter="actual"`` can let that real figure drive the compaction trigger.

What counts as a reading
------------------------
Context-window occupancy of one request is ``input_tokens + cache_write_tokens``.
Under the host's usage contract ``input_tokens`` is already the gross input (fresh
tokens plus tokens served from the prompt cache), so ``cache_read_tokens`` is never
added on top. Cache writes are billed apart from the gross input (a first request with
a large system prompt can report almost everything as cache writes), so they must be
added or occupancy would be badly undercounted.

The number is retrospective: it describes the request that was just answered, not the
one being assembled now (the "one-call lag"). Two forward-looking uses close that lag:

* Each view handed out is answered by at most one reading (the first one after it); the
  trigger figure for the next request is that reading plus the modelled size of what the
  view has gained since (``TokenMeter.figure``).
* The pairs (our estimate of a view, the reading that answered it) fit a ``SizeModel``,
  ``real = overhead + k * estimate``: ``overhead`` is what every request carries that the
  context does not hold (tool definitions, system overlays) and does not shrink when
  messages leave; ``k`` is the estimator's bias. The ladder sizes reductions in estimate
  units, so the manager converts its real-unit targets with ``SizeModel.to_estimate``.

Where the numbers come from
---------------------------
Host facts (amplifier-core 2.0.2, checked against the real hook registry):

* Handlers are called as ``handler(event, data)``; both plain and ``async`` functions
  are accepted. ``register`` returns a callable that unregisters the handler (it returns
  ``None`` and may be called more than once).
* Payloads are JSON-round-tripped by the host before handlers see them. A value that is
  not JSON (for example a pydantic ``Usage`` object) arrives as its ``str()``, which for
  ``Usage`` is ``"input_tokens=10 output_tokens=2 ... cache_write_tokens=None ..."``.
  Integers too large for the host's JSON layer arrive as floats. ``data`` itself is
  passed through unchanged when it is not a dict.
* Key names: ``amplifier_core.message_models.Usage`` has ``input_tokens``,
  ``cache_read_tokens`` and ``cache_write_tokens`` (the cache fields may be ``None``); the
  gRPC wire ``Usage`` uses ``prompt_tokens`` and ``cache_creation_tokens``; the ``Usage``
  docstring names Anthropic's ``cache_creation_input_tokens`` as an allowed extra.

So ``usage`` is accepted as a mapping, as an object with those attributes, or as text:
a JSON object; a Python dict literal (parsed with ``ast.literal_eval``, which evaluates
literals only and never runs code, and only when the text is shaped like a dict); or
the ``name=value`` rendering of a pydantic model (or a dict rendering that holds
non-literal values such as ``Decimal``), from which only the known integer keys are
picked. Text with unbalanced brackets looks cut off and is refused, as is text naming a
known key twice. Anything that does not yield a clean reading is ignored and the
previous reading stays.

Key precedence: the canonical names win (``input_tokens``, then ``prompt_tokens``;
``cache_write_tokens``, then ``cache_creation_tokens``, then
``cache_creation_input_tokens``). One raw-provider shape gets special treatment: when the
usage carries Anthropic's own ``cache_read_input_tokens`` and none of the normalised
cache keys (``cache_read_tokens`` / ``cache_write_tokens``), it is the provider's raw
usage, whose ``input_tokens`` *excludes* cache reads; the cache reads are then added to
rebuild the gross input. Undercounting is the dangerous direction for a trigger, and a
normalised payload always carries the normalised keys.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ._size_model import (
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    FIT_PAIRS,
    IDENTITY,
    SizeModel,
    as_count,
    fit_size_model,
)

if TYPE_CHECKING:
    from amplifier_core.models import HookResult

__all__ = [
    "CALIBRATION_MAX",
    "CALIBRATION_MIN",
    "FIT_PAIRS",
    "IDENTITY",
    "METER_EVENT",
    "METER_HOOK_NAME",
    "METER_HOOK_PRIORITY",
    "ForegroundUsageRecorder",
    "MeterStats",
    "SizeModel",
    "TokenMeter",
    "choose_usage",
    "fit_size_model",
    "parse_usage_reading",
]

METER_HOOK_NAME = "context-simple-meter"
METER_HOOK_PRIORITY = 50
METER_EVENT = "llm:response"

#: Largest token count accepted in one *reading* field: a sanity bound against corrupt
#: usage, not a limit on budgets or estimates (those may be any non-negative int). 2**53
#: is the largest integer a JSON double carries exactly.
_MAX_READING = 2**53
#: Longest usage text we are willing to parse. A real usage rendering is a few hundred
#: characters; this bounds the work done on garbage.
_MAX_USAGE_TEXT = 16_384

_INPUT_KEYS = ("input_tokens", "prompt_tokens")
_WRITE_KEYS = ("cache_write_tokens", "cache_creation_tokens", "cache_creation_input_tokens")
_RAW_READ_KEY = "cache_read_input_tokens"
_NORMALISED_CACHE_KEYS = ("cache_read_tokens", "cache_write_tokens")
_KNOWN_KEYS = (*_INPUT_KEYS, *_WRITE_KEYS, _RAW_READ_KEY, "cache_read_tokens")

# ``name=123`` / ``name=None`` (pydantic str/repr) or ``'name': 123`` (dict rendering),
# for known names only. Floats and other values do not match, so such a key stays absent
# (and an absent input count rejects the reading).
_PAIR_RE = re.compile(
    r"(?<![\w.])['\"]?(" + "|".join(_KNOWN_KEYS) + r")['\"]?\s*[:=]\s*(-?\d+|None)(?![\w.])"
)

_BRACKETS = (("{", "}"), ("(", ")"), ("[", "]"))

_UNSET: Any = object()


class ForegroundUsageRecorder(Protocol):
    """Records the usage of a request an orchestrator counted itself.

    Returns True when the values were accepted, False when they were invalid (negative,
    not an ``int``, a ``bool``, too large, or adding up to zero). ``cache_write_tokens``
    may be ``None`` (as it is on ``Usage`` when a provider has no cache data) and then
    counts as 0.
    """

    def __call__(self, *, input_tokens: int, cache_write_tokens: int | None = 0) -> bool: ...


def _tokens(value: object) -> int | None:
    """``value`` as a plausible token count of one usage field, or None."""
    count = as_count(value)
    return None if count is None or count > _MAX_READING else count


def _fields_from_text(text: str) -> Mapping[str, object] | None:
    """Recover usage fields from a string rendering of them (see module docstring)."""
    stripped = text.strip()
    if not stripped or len(stripped) > _MAX_USAGE_TEXT:
        return None
    if any(stripped.count(o) != stripped.count(c) for o, c in _BRACKETS):
        return None  # looks cut off: the last number we would read may be truncated
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            decoded = json.loads(stripped)
        except ValueError:
            decoded = None
        if decoded is None:
            try:
                decoded = ast.literal_eval(stripped)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                decoded = None
        if isinstance(decoded, dict):
            return decoded
    pairs: dict[str, object] = {}
    for name, raw in _PAIR_RE.findall(stripped):
        if name in pairs:
            return None  # the same key twice (e.g. nested): ambiguous, refuse to guess
        pairs[name] = None if raw == "None" else int(raw)
    return pairs or None


def _fields_from_object(obj: object) -> Mapping[str, object] | None:
    """Read the known usage attributes off an arbitrary object (e.g. a ``Usage`` model)."""
    fields: dict[str, object] = {}
    for name in _KNOWN_KEYS:
        value = getattr(obj, name, _UNSET)
        if value is not _UNSET:
            fields[name] = value
    return fields or None


def _usage_fields(usage: object) -> Mapping[str, object] | None:
    if isinstance(usage, Mapping):
        return usage  # pyright: ignore[reportUnknownVariableType]
    if isinstance(usage, str):
        return _fields_from_text(usage)
    if usage is None or isinstance(usage, int | float | bytes | list | tuple):
        return None
    return _fields_from_object(usage)


def _pick(fields: Mapping[str, object], keys: tuple[str, ...]) -> object:
    """The first of ``keys`` whose value is not None, or None when all are missing."""
    for key in keys:
        value = fields.get(key)
        if value is not None:
            return value
    return None


def parse_usage_reading(usage: object) -> int | None:
    """The context occupancy a usage value reports, or None when it gives no clean reading.

    Pure and total: any input, however malformed, yields an int or None without raising.
    """
    try:
        fields = _usage_fields(usage)
        if fields is None:
            return None
        gross = _tokens(_pick(fields, _INPUT_KEYS))
        if gross is None:
            return None
        raw_write = _pick(fields, _WRITE_KEYS)
        write = 0 if raw_write is None else _tokens(raw_write)
        if write is None:
            return None
        raw_read = fields.get(_RAW_READ_KEY)
        if raw_read is not None and all(fields.get(k) is None for k in _NORMALISED_CACHE_KEYS):
            read = _tokens(raw_read)
            if read is None:
                return None
            gross += read
        total = gross + write
        return total if total > 0 else None
    except Exception:
        return None


def _continue_result() -> HookResult | dict[str, str]:
    """A fresh "continue" result.

    amplifier-core is supplied by the host at run time and is not a dependency of this
    package, so the import is deferred to the call and guarded; without it the plain
    dict form of the same answer is returned.
    """
    try:
        from amplifier_core.models import HookResult
    except Exception:
        return {"action": "continue"}
    return HookResult(action="continue")


@dataclass(frozen=True)
class _MeterState:
    """Everything mutable in a ``TokenMeter``; the opaque snapshot value."""

    latest_reading: int | None
    reading_count: int
    foreground_claimed: bool
    pending_estimate: int | None
    viewed: bool
    anchor: tuple[int | None, int] | None
    pairs: tuple[tuple[int, int], ...]
    model: SizeModel
    recent: tuple[int, ...] = ()


RECENT_READINGS = 16
"""Readings remembered by value, so a rollback can re-apply those that arrived meanwhile."""


class TokenMeter:
    """Holds the provider's readings, pairs them with the views they answered, fits a size model.

    Two ways in:

    * ``on_llm_response`` is the hook handler for ``llm:response`` (register it under
      ``METER_HOOK_NAME`` at ``METER_HOOK_PRIORITY``). It reads the event's ``usage``
      defensively, never raises, and always lets the event continue.
    * ``claim_foreground_usage()`` hands an orchestrator that counts its own requests a
      recorder. From the claim on, generic ``llm:response`` readings are ignored so that
      side calls (a summariser, a naming hook) cannot overwrite the orchestrator's
      figure for the real request.

    Pairing: the manager calls ``note_request_estimate`` with its estimate of each view it
    hands out. The first accepted reading after that answers the view: it becomes the
    *anchor* of the trigger figure (``figure``) and the pair (estimate, reading) is added to
    the pairs the ``SizeModel`` is fitted on. Further readings before the next view (side
    calls) are recorded (``latest_reading``, ``reading_count``) but answer nothing. A reading
    that arrives before any view was handed out covers the history as it stands: it anchors
    the figure as is, and the manager pairs it with its estimate of that history when it
    next hands out a view (``anchor_estimate``). Pairing is positional, so a side call
    answered *before* the real response can still take a view's place; the foreground
    claim is the cure.
    """

    def __init__(self) -> None:
        self._latest: int | None = None
        self._count = 0
        self._claimed = False
        self._pending_estimate: int | None = None
        self._viewed = False
        self._anchor: tuple[int | None, int] | None = None
        self._pairs: tuple[tuple[int, int], ...] = ()
        self._model = IDENTITY
        self._recent: tuple[int, ...] = ()

    # -- readings -------------------------------------------------------------------

    @property
    def latest_reading(self) -> int | None:
        """Occupancy of the most recent reading (any call), or None before the first."""
        return self._latest

    @property
    def answered_reading(self) -> int | None:
        """The reading that answered the latest answered view (what the trigger builds on)."""
        return None if self._anchor is None else self._anchor[1]

    @property
    def reading_count(self) -> int:
        """How many readings have been accepted since construction or the last reset."""
        return self._count

    @property
    def foreground_claimed(self) -> bool:
        """Whether an orchestrator has claimed the count (generic events are ignored)."""
        return self._claimed

    def _record(self, reading: int) -> None:
        self._latest = reading
        self._count += 1
        self._recent = (*self._recent, reading)[-RECENT_READINGS:]
        estimate = self._pending_estimate
        if estimate is not None:
            self._pending_estimate = None
            self._anchor = (estimate, reading)
            self._add_pair(estimate, reading)
        elif not self._viewed:
            self._anchor = (None, reading)

    def _add_pair(self, estimate: int, reading: int) -> None:
        if estimate == 0:
            return
        self._pairs = (*self._pairs, (estimate, reading))[-FIT_PAIRS:]
        self._model = fit_size_model(self._pairs)

    async def on_llm_response(self, event: str, data: Any) -> HookResult | dict[str, str]:
        """Hook handler for ``llm:response``: record ``data["usage"]`` if it is clean.

        Ignores other event names, non-mapping ``data``, malformed usage, and every
        event once the foreground count has been claimed. Never raises.
        """
        try:
            if event == METER_EVENT and not self._claimed and isinstance(data, Mapping):
                reading = parse_usage_reading(data.get("usage"))  # pyright: ignore[reportUnknownMemberType]
                if reading is not None:
                    self._record(reading)
        except Exception:
            pass  # observability must never break a response
        return _continue_result()

    def claim_foreground_usage(self) -> ForegroundUsageRecorder:
        """Claim the count for the calling orchestrator and return its recorder.

        Each call of the recorder (re)asserts the claim, so the claim survives a
        ``restore`` to a snapshot taken before it. Its readings pair with views exactly
        like generic ones.
        """
        self._claimed = True

        def record(*, input_tokens: int, cache_write_tokens: int | None = 0) -> bool:
            gross = _tokens(input_tokens)
            write = 0 if cache_write_tokens is None else _tokens(cache_write_tokens)
            if gross is None or write is None or gross + write == 0:
                return False
            self._claimed = True
            self._record(gross + write)
            return True

        return record

    # -- views and the size model ---------------------------------------------------

    def note_request_estimate(self, estimate: int) -> None:
        """Our estimate of the view just handed out; the next reading answers it.

        Pass the raw estimator figure of the view as sent. A later call replaces an
        unanswered earlier view.
        """
        if as_count(estimate) is None:
            raise ValueError(
                f"note_request_estimate: estimate must be a non-negative int, got {estimate!r}"
            )
        self._pending_estimate = int(estimate)
        self._viewed = True

    def anchor_estimate(self, covered: int) -> None:
        """Pair an unanchored reading (one that came before any view) with ``covered``.

        ``covered`` is our estimate of the history that reading covered. Does nothing when
        the anchor already has its estimate.
        """
        if as_count(covered) is None:
            raise ValueError(
                f"anchor_estimate: covered must be a non-negative int, got {covered!r}"
            )
        if self._anchor is not None and self._anchor[0] is None:
            reading = self._anchor[1]
            self._anchor = (covered, reading)
            self._add_pair(covered, reading)

    @property
    def size_model(self) -> SizeModel:
        """The model fitted on this session's pairs (the identity before the first pair)."""
        return self._model

    def size_model_for(self, estimate: int) -> SizeModel:
        """The model in force for a view estimated at ``estimate`` now.

        The fitted model, except that an unanchored reading is provisionally paired with
        ``estimate`` (it covers the history as it stands).
        """
        if self._anchor is not None and self._anchor[0] is None:
            return fit_size_model((*self._pairs, (estimate, self._anchor[1])))
        return self._model

    def figure(self, estimate: int) -> int | None:
        """The real-size figure of a view estimated at ``estimate``, or None before a reading.

        The anchoring reading plus the modelled size of what the view gained since the view
        that reading answered (negative when it shrank, never below 0).
        """
        if as_count(estimate) is None:
            raise ValueError(f"figure: estimate must be a non-negative int, got {estimate!r}")
        if self._anchor is None:
            return None
        answered, reading = self._anchor
        if answered is None:
            return reading
        return max(0, reading + self._model.growth(estimate - answered))

    @property
    def calibration_ratio(self) -> float | None:
        """The size model's ``k``, or None before the first pair."""
        return self._model.k if self._pairs else None

    @property
    def pair_count(self) -> int:
        """How many (estimate, reading) pairs the size model is fitted on."""
        return len(self._pairs)

    # -- state ----------------------------------------------------------------------

    def snapshot(self) -> object:
        """An opaque, immutable capture of all mutable state, for ``restore``."""
        return _MeterState(
            latest_reading=self._latest,
            reading_count=self._count,
            foreground_claimed=self._claimed,
            pending_estimate=self._pending_estimate,
            viewed=self._viewed,
            anchor=self._anchor,
            pairs=self._pairs,
            model=self._model,
            recent=self._recent,
        )

    def restore(self, snapshot: object) -> None:
        """Put the meter back exactly as it was when ``snapshot`` was taken."""
        if not isinstance(snapshot, _MeterState):
            raise TypeError(
                f"restore: expected a snapshot from TokenMeter.snapshot(), got {type(snapshot)!r}"
            )
        self._latest = snapshot.latest_reading
        self._count = snapshot.reading_count
        self._claimed = snapshot.foreground_claimed
        self._pending_estimate = snapshot.pending_estimate
        self._viewed = snapshot.viewed
        self._anchor = snapshot.anchor
        self._pairs = snapshot.pairs
        self._model = snapshot.model
        self._recent = snapshot.recent

    def restore_keeping_readings(self, snapshot: object) -> None:
        """Go back to ``snapshot`` and record again the readings accepted since it.

        For a rollback: what the rolled-back request noted (the view it would have sent)
        goes, while what the provider reported meanwhile is applied as if that request had
        never been made (so a reading pairs with the view that really went out).
        """
        if not isinstance(snapshot, _MeterState):
            raise TypeError(
                f"restore: expected a snapshot from TokenMeter.snapshot(), got {type(snapshot)!r}"
            )
        arrived = self._count - snapshot.reading_count
        readings = self._recent[-arrived:] if arrived > 0 else ()
        claimed = self._claimed
        self.restore(snapshot)
        self._claimed = claimed
        self._count += max(0, arrived - len(readings))
        for reading in readings:
            self._record(reading)

    def reset(self) -> None:
        """Forget readings, pairs and the model (the conversation was cleared or replaced).

        The foreground claim is kept: it says who counts requests in this session, which
        does not change when the history does.
        """
        self._latest = None
        self._count = 0
        self._pending_estimate = None
        self._viewed = False
        self._anchor = None
        self._pairs = ()
        self._model = IDENTITY
        self._recent = ()


@dataclass(frozen=True)
class MeterStats:
    """What the trigger used for one request, and what else was known.

    ``measured`` is the reading the figure is anchored on (the one that answered the
    latest view); ``latest_reading`` is the newest reading of any call. ``overhead`` and
    ``calibration_ratio`` are the size model in force (``overhead`` / ``k``), None before
    the first pair. ``images_measured`` is True when a real reading exists and the current
    view contains images: the estimator only charges a flat allowance per image, while the
    provider's figure counts them for real.
    """

    mode: Literal["estimate", "actual"]
    source: Literal["estimate", "actual"]
    used: int
    estimated: int
    measured: int | None
    budget: int
    ratio: float
    images_measured: bool
    calibration_ratio: float | None
    overhead: int | None = None
    latest_reading: int | None = None
    view_estimate: int = 0
    """Our estimate of the whole view as it would go out (the compaction notice included)."""

    def as_dict(self) -> dict[str, Any]:
        """A plain JSON-safe dict of every field (for ``_last_token_meter_stats``)."""
        return {
            "mode": self.mode,
            "source": self.source,
            "used": self.used,
            "estimated": self.estimated,
            "measured": self.measured,
            "budget": self.budget,
            "ratio": self.ratio,
            "images_measured": self.images_measured,
            "calibration_ratio": self.calibration_ratio,
            "overhead": self.overhead,
            "latest_reading": self.latest_reading,
            "view_estimate": self.view_estimate,
        }


def choose_usage(
    *,
    mode: str,
    estimated: int,
    meter: TokenMeter,
    budget: int,
    view_has_images: bool,
    view_estimate: int | None = None,
) -> MeterStats:
    """Decide which number the compaction trigger uses for this request.

    ``"actual"`` uses ``meter.figure(view_estimate)`` once a reading exists (the reading
    that answered the latest view plus the modelled growth since) and the estimate until
    then. ``view_estimate`` is our estimate of the whole view as it would go out (readings
    answer whole views, so the figure compares like with like); it defaults to
    ``estimated``, which is what the estimate-mode trigger compares;
    ``"estimate"`` always uses the estimate (the readings, if any, are still reported).
    ``mode`` must already be validated: anything else is a ValueError, as are an
    ``estimated`` that is not a non-negative int and a ``budget`` that is not a positive
    int. Neither has an upper bound.
    """
    if mode != "estimate" and mode != "actual":
        raise ValueError(f"choose_usage: mode must be 'estimate' or 'actual', got {mode!r}")
    if as_count(estimated) is None:
        raise ValueError(f"choose_usage: estimated must be a non-negative int, got {estimated!r}")
    if not as_count(budget):
        raise ValueError(f"choose_usage: budget must be a positive int, got {budget!r}")
    whole = estimated if view_estimate is None else view_estimate
    if as_count(whole) is None:
        raise ValueError(
            f"choose_usage: view_estimate must be a non-negative int, got {view_estimate!r}"
        )
    measured = meter.answered_reading
    figure = meter.figure(whole)
    source: Literal["estimate", "actual"]
    if mode == "actual" and figure is not None:
        source, used = "actual", figure
    else:
        source, used = "estimate", estimated
    model = meter.size_model_for(whole)
    known = measured is not None
    return MeterStats(
        mode=mode,
        source=source,
        used=used,
        estimated=estimated,
        measured=measured,
        budget=budget,
        ratio=used / budget,
        images_measured=measured is not None and bool(view_has_images),
        calibration_ratio=model.k if known else None,
        overhead=model.overhead if known else None,
        latest_reading=meter.latest_reading,
        view_estimate=whole,
    )
