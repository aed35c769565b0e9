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
one being assembled now (the "one-call lag"). The calibration ratio below is a second,
forward-looking use of the same signal.

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
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from amplifier_core.models import HookResult

__all__ = [
    "CALIBRATION_ALPHA",
    "CALIBRATION_MAX",
    "CALIBRATION_MIN",
    "METER_EVENT",
    "METER_HOOK_NAME",
    "METER_HOOK_PRIORITY",
    "ForegroundUsageRecorder",
    "MeterStats",
    "TokenMeter",
    "choose_usage",
    "parse_usage_reading",
]

METER_HOOK_NAME = "context-simple-meter"
METER_HOOK_PRIORITY = 50
METER_EVENT = "llm:response"

#: Weight of the newest (real / estimate) sample in the running calibration ratio.
#: 0.3 follows a real shift within a handful of requests while one odd request (a huge
#: tool schema, a retry) moves the ratio by less than a third of its deviation.
CALIBRATION_ALPHA = 0.3
#: Bounds for every calibration sample and therefore for the ratio itself. A sample
#: outside [1/4, 4] says more about a mis-paired reading than about the estimator.
CALIBRATION_MIN = 0.25
CALIBRATION_MAX = 4.0

#: Largest token count accepted for one field. The host's wire ``Usage`` carries token
#: counts as 32-bit integers; anything larger is corrupt, not a real request.
_MAX_TOKENS = 2**31 - 1
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
    """``value`` as a token count, or None when it is not a plausible one."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value < 0 or value > _MAX_TOKENS:
        return None
    return int(value)


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
    calibration_ratio: float | None
    calibration_samples: int


class TokenMeter:
    """Holds the latest real usage reading and a running estimate-calibration ratio.

    Two ways in:

    * ``on_llm_response`` is the hook handler for ``llm:response`` (register it under
      ``METER_HOOK_NAME`` at ``METER_HOOK_PRIORITY``). It reads the event's ``usage``
      defensively, never raises, and always lets the event continue.
    * ``claim_foreground_usage()`` hands an orchestrator that counts its own requests a
      recorder. From the claim on, generic ``llm:response`` readings are ignored so that
      side calls (a summariser, a naming hook) cannot overwrite the orchestrator's
      figure for the real request.

    Calibration: the manager calls ``note_request_estimate`` with its own (uncalibrated)
    estimate of each view it hands out. The next accepted reading is paired with that
    estimate and folds ``real / estimate`` into an exponentially weighted ratio
    (``CALIBRATION_ALPHA``, each sample clamped to [``CALIBRATION_MIN``,
    ``CALIBRATION_MAX``]). The real request also carries things the estimate never saw,
    such as tool schemas and system overlays the orchestrator adds; that is intended, the
    ratio absorbs them. A reading with no pending estimate (or a pending estimate of 0)
    updates ``latest_reading`` but not the ratio. Pairing is positional, so a foreign
    LLM call answered between a view and its response can skew one sample; the clamp
    and the smoothing bound the damage.
    """

    def __init__(self) -> None:
        self._latest: int | None = None
        self._count = 0
        self._claimed = False
        self._pending_estimate: int | None = None
        self._ratio: float | None = None
        self._samples = 0

    # -- readings -------------------------------------------------------------------

    @property
    def latest_reading(self) -> int | None:
        """Occupancy of the most recently answered request, or None before the first."""
        return self._latest

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
        estimate = self._pending_estimate
        self._pending_estimate = None
        if estimate is None or estimate == 0:
            return
        sample = min(CALIBRATION_MAX, max(CALIBRATION_MIN, reading / estimate))
        if self._ratio is None:
            self._ratio = sample
        else:
            self._ratio = CALIBRATION_ALPHA * sample + (1.0 - CALIBRATION_ALPHA) * self._ratio
        self._samples += 1

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
        ``restore`` to a snapshot taken before it.
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

    # -- calibration ----------------------------------------------------------------

    def note_request_estimate(self, estimate: int) -> None:
        """Remember our estimate of the view just handed out, for the next reading.

        Pass the raw estimator figure, not a calibrated one, or the ratio would chase
        its own output. A later call replaces an unpaired earlier estimate.
        """
        if _tokens(estimate) is None:
            raise ValueError(
                f"note_request_estimate: estimate must be a non-negative int, got {estimate!r}"
            )
        self._pending_estimate = int(estimate)

    @property
    def calibration_ratio(self) -> float | None:
        """Smoothed ``real / estimate`` ratio, or None before the first paired reading."""
        return self._ratio

    def calibrated(self, estimate: int) -> int:
        """``estimate`` scaled by the calibration ratio (rounded up), or as is without one.

        The product is rounded to 6 decimals before the ceiling so float noise in the
        ratio (1.1 * 100 == 110.00000000000001) does not add a token.
        """
        if _tokens(estimate) is None:
            raise ValueError(f"calibrated: estimate must be a non-negative int, got {estimate!r}")
        if self._ratio is None:
            return int(estimate)
        return math.ceil(round(estimate * self._ratio, 6))

    # -- state ----------------------------------------------------------------------

    def snapshot(self) -> object:
        """An opaque, immutable capture of all mutable state, for ``restore``."""
        return _MeterState(
            latest_reading=self._latest,
            reading_count=self._count,
            foreground_claimed=self._claimed,
            pending_estimate=self._pending_estimate,
            calibration_ratio=self._ratio,
            calibration_samples=self._samples,
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
        self._ratio = snapshot.calibration_ratio
        self._samples = snapshot.calibration_samples

    def reset(self) -> None:
        """Forget readings and calibration (the conversation was cleared or replaced).

        The foreground claim is kept: it says who counts requests in this session, which
        does not change when the history does.
        """
        self._latest = None
        self._count = 0
        self._pending_estimate = None
        self._ratio = None
        self._samples = 0


@dataclass(frozen=True)
class MeterStats:
    """What the trigger used for one request, and what else was known.

    ``images_measured`` is True when a real reading exists and the current view
    contains images: the estimator only charges a flat allowance per image, while the
    provider's figure counts them for real. Because of the one-call lag the reading
    covers the images of the previous request, which in an append-only history are
    the same images unless new ones just arrived.
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
        }


def choose_usage(
    *,
    mode: str,
    estimated: int,
    meter: TokenMeter,
    budget: int,
    view_has_images: bool,
) -> MeterStats:
    """Decide which number the compaction trigger uses for this request.

    ``"actual"`` uses the meter's latest reading once one exists and the estimate until
    then; ``"estimate"`` always uses the estimate (the reading, if any, is still reported
    as ``measured``). A reading describes the previous request, so in ``"actual"`` mode the
    calibrated estimate of the current view wins when it is larger: a big tool result that
    arrived since the last response must not slip past the trigger. ``mode`` must already be
    validated: anything else is a ValueError, as are a negative ``estimated`` and a
    non-positive ``budget``.
    """
    if mode != "estimate" and mode != "actual":
        raise ValueError(f"choose_usage: mode must be 'estimate' or 'actual', got {mode!r}")
    if _tokens(estimated) is None:
        raise ValueError(f"choose_usage: estimated must be a non-negative int, got {estimated!r}")
    if not _tokens(budget):
        raise ValueError(f"choose_usage: budget must be a positive int, got {budget!r}")
    measured = meter.latest_reading
    source: Literal["estimate", "actual"]
    if mode == "actual" and measured is not None:
        source, used = "actual", max(measured, meter.calibrated(estimated))
    else:
        source, used = "estimate", estimated
    return MeterStats(
        mode=mode,
        source=source,
        used=used,
        estimated=estimated,
        measured=measured,
        budget=budget,
        ratio=used / budget,
        images_measured=measured is not None and bool(view_has_images),
        calibration_ratio=meter.calibration_ratio,
    )
