"""Real-usage token meter: what the provider says the last request cost.

The request path sizes views with a cheap character-based estimator. That estimator
has never been checked against what providers actually bill, and can be far off. This
module listens on the host's ``llm:response`` event and keeps the provider's own figure
for the request that was just answered, so that:

* the drift between estimate and reality is always visible (``MeterStats``), in every
  ``token_meter`` mode, and
* ``token_meter="actual"`` can let that real figure drive the compaction trigger.

How a usage value becomes a reading is ``_usage``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._learned_overhead import OVERHEAD_DROP_SHARE, OVERHEAD_STEP, LearnedOverhead
from ._reading_gate import ReadingGate, Rejection
from ._size_model import (
    CALIBRATION_MAX,
    CALIBRATION_MIN,
    FIT_PAIRS,
    IDENTITY,
    SizeModel,
    as_count,
    fit_size_model,
)
from ._usage import parse_usage_reading, reading_tokens

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
    "OVERHEAD_DROP_SHARE",
    "OVERHEAD_STEP",
    "ForegroundUsageRecorder",
    "SizeModel",
    "TokenMeter",
    "continue_result",
    "fit_size_model",
    "parse_usage_reading",
]

_NOTHING_LEARNED = LearnedOverhead()

METER_HOOK_NAME = "context-simple-meter"
METER_HOOK_PRIORITY = 50
METER_EVENT = "llm:response"


class ForegroundUsageRecorder(Protocol):
    """Records the usage of a request an orchestrator counted itself.

    Returns True when the values were accepted, False when they were invalid (negative,
    not an ``int``, a ``bool``, too large, or adding up to zero). ``cache_write_tokens``
    may be ``None`` (as it is on ``Usage`` when a provider has no cache data) and then
    counts as 0.
    """

    def __call__(self, *, input_tokens: int, cache_write_tokens: int | None = 0) -> bool: ...


def continue_result() -> HookResult | dict[str, str]:
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
    anchor: tuple[int, int] | None
    pairs: tuple[tuple[int, int], ...]
    model: SizeModel
    recent: tuple[int, ...] = ()
    pending_accounted: int | None = None
    learned: LearnedOverhead = _NOTHING_LEARNED
    carried: tuple[int | None, ...] = ()
    pending_room: int | None = None
    gate: tuple[bool, int] = (False, 0)


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
    calls) are recorded (``latest_reading``, ``reading_count``) but answer nothing, and so
    does a reading that arrives before any view went out (after a resume it is some other
    call's: a reading answers a view that went out, never one that did not). A reading far
    above what its request carried answers nothing either until the next one confirms it
    (``_reading_gate``). Pairing is positional, so a side call answered *before* the real
    response can still take a view's place; the foreground claim is the cure.
    """

    def __init__(self) -> None:
        self._latest: int | None = None
        self._count = 0
        self._claimed = False
        self._pending_estimate: int | None = None
        self._anchor: tuple[int, int] | None = None
        self._pairs: tuple[tuple[int, int], ...] = ()
        self._carried: tuple[int | None, ...] = ()
        self._model = IDENTITY
        self._recent: tuple[int, ...] = ()
        self._pending_accounted: int | None = None
        self._pending_room: int | None = None
        self._learned = LearnedOverhead()
        self._gate = ReadingGate()

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

    def _record(self, reading: int, *, replay: bool = False) -> None:
        self._latest = reading
        self._count += 1
        self._recent = (*self._recent, reading)[-RECENT_READINGS:]
        estimate, accounted = self._pending_estimate, self._pending_accounted
        if estimate is None:
            return  # a side call, or a reading before any view went out: it answers nothing
        self._pending_estimate = self._pending_accounted = None
        room, self._pending_room = self._pending_room, None
        if not self._gate.admit(reading, accounted, room, report=not replay):
            return
        self._anchor = (estimate, reading)
        self._add_pair(estimate, reading, accounted)
        if accounted is not None:
            model = self._model  # a fitted slope above 1: the estimator's bias, no overhead
            bias = model.to_real(estimate) - model.overhead - estimate if model.sloped else 0
            self._learned = self._learned.after(reading - accounted, max(0, bias))

    def _add_pair(self, estimate: int, reading: int, carried: int | None) -> None:
        if estimate == 0:
            return
        self._pairs = (*self._pairs, (estimate, reading))[-FIT_PAIRS:]
        self._carried = (*self._carried, carried)[-FIT_PAIRS:]
        self._model = fit_size_model(self._pairs, prior=self._model, carried=self._carried)

    def take_rejections(self) -> tuple[Rejection, ...]:
        """Readings not believed since the last call (for ``context:reading_rejected``)."""
        return self._gate.take()

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
        return continue_result()

    def claim_foreground_usage(self) -> ForegroundUsageRecorder:
        """Claim the count for the calling orchestrator and return its recorder.

        Each call of the recorder (re)asserts the claim, so the claim survives a
        ``restore`` to a snapshot taken before it. Its readings pair with views exactly
        like generic ones.
        """
        self._claimed = True

        def record(*, input_tokens: int, cache_write_tokens: int | None = 0) -> bool:
            gross = reading_tokens(input_tokens)
            write = 0 if cache_write_tokens is None else reading_tokens(cache_write_tokens)
            if gross is None or write is None or gross + write == 0:
                return False
            self._claimed = True
            self._record(gross + write)
            return True

        return record

    # -- views and the size model ---------------------------------------------------

    def note_request_estimate(
        self, estimate: int, *, accounted: int | None = None, room: int | None = None
    ) -> None:
        """Our estimate of the view just handed out; the next reading answers it.

        Pass the raw estimator figure of the view as sent. ``accounted`` is everything the
        module can account for in that request (the view and the tool definitions it
        carried, whether or not its budget held them back); what the answering reading shows
        beyond it is the learned overhead. ``room`` is what the request's whole input could
        hold (``Budget.input_room``): a reading above it and far above ``accounted`` is not
        believed until confirmed. A later call replaces an unanswered earlier view.
        """
        if as_count(estimate) is None:
            raise ValueError(
                f"note_request_estimate: estimate must be a non-negative int, got {estimate!r}"
            )
        for key, value in (("accounted", accounted), ("room", room)):
            if value is not None and as_count(value) is None:
                raise ValueError(
                    f"note_request_estimate: {key} must be a non-negative int, got {value!r}"
                )
        self._pending_estimate = int(estimate)
        self._pending_accounted = None if accounted is None else int(accounted)
        self._pending_room = None if room is None else int(room)

    @property
    def learned_overhead(self) -> int:
        """Tokens the provider's readings showed beyond the view and the tool definitions
        (injections, framing), the estimator's bias included."""
        return self._learned.whole

    def held_overhead(self, meter_mode: str) -> int:
        """The learned overhead the budget holds back in ``meter_mode`` (``_learned_overhead``:
        with ``actual`` the size model carries the estimator's bias, so it is left out)."""
        return self._learned.held(meter_mode)

    @property
    def size_model(self) -> SizeModel:
        """The model fitted on this session's pairs (the identity before the first pair)."""
        return self._model

    def size_model_for(self, estimate: int) -> SizeModel:
        """The model in force for a view estimated at ``estimate`` now: the fitted one (every
        reading it is fitted on answered a view that went out, whatever its size)."""
        del estimate
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
            anchor=self._anchor,
            pairs=self._pairs,
            model=self._model,
            recent=self._recent,
            pending_accounted=self._pending_accounted,
            learned=self._learned,
            carried=self._carried,
            pending_room=self._pending_room,
            gate=(self._gate.held, self._gate.rejections),
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
        self._anchor = snapshot.anchor
        self._pairs = snapshot.pairs
        self._model = snapshot.model
        self._recent = snapshot.recent
        self._pending_accounted = snapshot.pending_accounted
        self._learned = snapshot.learned
        self._carried = snapshot.carried
        self._pending_room = snapshot.pending_room
        self._gate.held, self._gate.rejections = snapshot.gate

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
            self._record(reading, replay=True)

    def reset(self) -> None:
        """Forget readings, pairs and the model (the conversation was cleared or replaced).

        The foreground claim, the learned overhead and the reading gate are kept: they
        describe this session's requests (who counts them, what surrounds the view in them,
        what the provider reports), which do not change when the history does.
        """
        self._latest = None
        self._count = 0
        self._pending_estimate = None
        self._anchor = None
        self._pairs = ()
        self._carried = ()
        self._model = IDENTITY
        self._recent = ()
        self._pending_accounted = None
        self._pending_room = None
