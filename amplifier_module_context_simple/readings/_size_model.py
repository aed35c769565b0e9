"""The real-size model: a view's real size as ``overhead + k * estimate``.

The request path sizes views with a cheap estimator; the provider bills something else. The
difference has two parts that behave differently when messages leave a view: an *overhead*
that every request carries and the context does not hold (tool definitions, system overlays),
which does not shrink, and the estimator's *bias* ``k``, which scales with the view. A purely
multiplicative calibration folds the first into the second and then badly overstates what a
reduction frees. ``SizeModel`` is the immutable value the manager converts figures with;
``fit_size_model`` fits it from (our estimate of a view, the provider's reading for it) pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..vocabulary._numbers import is_int, is_number

__all__ = [
    "CALIBRATION_MAX",
    "CALIBRATION_MIN",
    "FIT_PAIRS",
    "IDENTITY",
    "SizeModel",
    "as_count",
    "fit_size_model",
]

#: Bounds for the estimator bias ``k`` of the size model. A bias outside [1/4, 4] says more
#: about a mis-paired reading than about the estimator.
CALIBRATION_MIN = 0.25
CALIBRATION_MAX = 4.0
#: How many recent (estimate, reading) pairs the size model is fitted over.
FIT_PAIRS = 8
#: The estimates of the pairs must spread by at least this share of the largest one before
#: a slope is fitted; closer together, the slope is noise and the one-pair rule applies.
_MIN_SPREAD = 0.10


def as_count(value: object) -> int | None:
    """``value`` as a non-negative int (bools excluded), or None."""
    if not is_int(value) or value < 0:
        return None
    return int(value)


def _exact(value: float) -> Fraction:
    """A float as the exact fraction of its shortest decimal form (1.1 -> 11/10)."""
    return Fraction(repr(value))


@dataclass(frozen=True, slots=True)
class SizeModel:
    """A view's real size as ``overhead + k * estimate`` (immutable).

    ``overhead`` is what every request holds that the context does not (tool definitions,
    system overlays); it does not shrink when messages leave. ``k`` is the estimator's bias.
    Both conversions are monotone and exact (no float noise); ``to_real`` rounds up and
    ``to_estimate`` down, so ``to_real(to_estimate(real)) <= real`` whenever
    ``real >= to_real(0)`` (below the overhead no estimate fits and ``to_estimate`` is 0).
    The default value is the identity.
    """

    overhead: int = 0
    k: float = 1.0
    sloped: bool = field(default=False, compare=False)
    """``k`` is a fitted slope (pairs of different size identified it), not a one-pair guess."""

    def __post_init__(self) -> None:
        if as_count(self.overhead) is None:
            raise ValueError(
                f"SizeModel: overhead must be a non-negative int, got {self.overhead!r}"
            )
        if not is_number(self.k):
            raise ValueError(f"SizeModel: k must be a positive number, got {self.k!r}")
        if not (math.isfinite(self.k) and self.k > 0):
            raise ValueError(f"SizeModel: k must be a positive number, got {self.k!r}")

    @property
    def identity(self) -> bool:
        return self.overhead == 0 and self.k == 1

    def to_real(self, estimate: int) -> int:
        """The modelled real size of a view estimated at ``estimate`` tokens."""
        if as_count(estimate) is None:
            raise ValueError(f"to_real: estimate must be a non-negative int, got {estimate!r}")
        if self.k == 1:
            return self.overhead + estimate
        return self.overhead + math.ceil(_exact(self.k) * estimate)

    def to_estimate(self, real: int) -> int:
        """The largest estimate whose modelled real size is at most ``real`` (0 if none)."""
        if as_count(real) is None:
            raise ValueError(f"to_estimate: real must be a non-negative int, got {real!r}")
        room = real - self.overhead
        if room <= 0:
            return 0
        if self.k == 1:
            return room
        return math.floor(room / _exact(self.k))

    def growth(self, delta: int) -> int:
        """Modelled real size of ``delta`` estimated tokens (negative when a view shrank)."""
        if self.k == 1:
            return delta
        return math.ceil(_exact(self.k) * delta)


IDENTITY = SizeModel()


def _clamp_k(k: float) -> float:
    return min(CALIBRATION_MAX, max(CALIBRATION_MIN, k))


def _slope(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Least-squares slope of reading over estimate, or None when the estimates barely differ."""
    estimates = [e for e, _ in pairs]
    if len(pairs) < 2 or max(estimates) - min(estimates) < _MIN_SPREAD * max(estimates):
        return None
    n = len(pairs)
    mean_e = sum(Fraction(e) for e in estimates) / n
    mean_r = sum(Fraction(r) for _, r in pairs) / n
    var = sum((e - mean_e) ** 2 for e in estimates)
    cov = sum((e - mean_e) * (r - mean_r) for e, r in pairs)
    return float(cov / var)


def fit_size_model(
    pairs: Sequence[tuple[int, int]],
    *,
    prior: SizeModel | None = None,
    carried: Sequence[int | None] | None = None,
) -> SizeModel:
    """Fit ``overhead + k * estimate`` to (estimate of a view, reading for that view) pairs.

    One pair (or pairs whose estimates barely differ): ``k = 1`` and the overhead is the
    difference when it is positive; a reading below the estimate means no overhead and
    ``k = reading / estimate``. More pairs: ``k`` is the least-squares slope over the most
    recent ``FIT_PAIRS`` of them. ``k`` is always clamped to [``CALIBRATION_MIN``,
    ``CALIBRATION_MAX``], and the overhead is anchored on the newest pair and never negative,
    so the model never puts the newest view below what the provider reported for it.
    Pairs with an estimate of 0 carry no information and are skipped.

    ``prior`` is the model in force before these pairs. When the recent pairs barely differ in
    size but ``prior`` has a fitted slope, that slope stands (the overhead re-anchored on the
    newest pair): a run of similar views says nothing new about ``k``, and falling back to
    ``k = 1`` would under-count growth whenever the real ``k`` is above 1.

    ``carried`` gives, per pair, what its request carried that the module accounts for (the
    view and the tool definitions; None where unknown). A slope below 1 must be explained by
    the views: what a reading shows beyond what its request carried is overhead (a hook
    reminder, framing) that can shrink between two requests, and a shrinking reminder is no
    evidence that the estimator over-counts. So the slope is at least the one fitted on the
    readings cut to what their requests carried.
    """
    known = list(carried) if carried is not None else [None] * len(pairs)
    if len(known) != len(pairs):
        raise ValueError(f"fit_size_model: carried has {len(known)} entries for {len(pairs)} pairs")
    rows = [(e, r, c) for (e, r), c in zip(pairs, known, strict=True) if e > 0][-FIT_PAIRS:]
    usable = [(e, r) for e, r, _ in rows]
    if not usable:
        return IDENTITY
    estimate, reading = usable[-1]
    slope = _slope(usable)
    if slope is not None and slope < 1:
        explained = _slope([(e, r if c is None else min(r, c)) for e, r, c in rows])
        slope = max(slope, slope if explained is None else explained)
    if slope is None and prior is not None and prior.sloped:
        return SizeModel(max(0, reading - prior.to_real(estimate) + prior.overhead), prior.k, True)
    if slope is None:
        if reading >= estimate:
            return SizeModel(reading - estimate, 1.0)
        slope = reading / estimate
    k = _clamp_k(slope)
    model = SizeModel(0, k)
    return SizeModel(max(0, reading - model.to_real(estimate)), k, True)
