"""The usage figure of one request: which number the compaction trigger compares.

``MeterStats`` reports our estimate beside the provider's readings (in every mode, so the
drift is always visible); ``choose_usage`` picks the figure the trigger uses.
"""

from __future__ import annotations

__all__ = ["MeterStats", "choose_usage"]

from dataclasses import dataclass, fields
from typing import Any, Literal

from ._meter import TokenMeter
from ._size_model import as_count


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

    @property
    def payload_figures(self) -> tuple[int | None, int | None]:
        """(``measured_tokens``, ``overhead_tokens``) for the compaction payload: only when
        the trigger used a reading."""
        return (self.used, self.overhead) if self.source == "actual" else (None, None)

    def as_dict(self) -> dict[str, Any]:
        """A plain JSON-safe dict of every field (for ``_last_token_meter_stats``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
