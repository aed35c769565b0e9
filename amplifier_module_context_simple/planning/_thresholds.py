"""One request's thresholds, computed once: every rule and the resume walk read them here.

A request's figures all follow from four things: the budget its views are compared with
(``effective``: a reading's whole request, or the estimate's), the settings, what the view's
notices may take (``reserved``: ``Planner.notices_reserve``) and the size model that converts
real figures into estimate units. From them, in one place:

- the **usable** budget, the **trigger** and the **target** (shares of the usable budget:
  ``ContextConfig``'s rules);
- the **room** and the **limit** in estimate units: the budget, and the budget less the
  notices (over it, a view escalates whatever the trigger says);
- the **cold floor**: the view from which a cold cache escalates, ``cold_cache_distance`` of
  the usable budget short of the trigger;
- the **quiet** figure: the view below which no rule but the turn-start one can fire at a
  request (``quiet`` with the cold-cache rule, ``quiet_warm`` without): a resume's walk passes
  over the request points surely below it;
- the **turn-start aim** for a turn expected to add so much (``turn_aim``).

When one of them changes, this is the module that changes.
"""

from __future__ import annotations

__all__ = ["DEEPEST_TARGET_SHARE", "Thresholds", "thresholds"]

import math
from dataclasses import dataclass

from ..readings._meter import IDENTITY, SizeModel
from ._config import ContextConfig

DEEPEST_TARGET_SHARE = 0.5
"""A turn-start escalation never aims below this share of the ordinary target."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The figures one request is planned against (real units unless said otherwise)."""

    effective: int
    """The budget the view is compared with."""
    usable: int
    trigger: float
    target: int
    reserved: int
    """What the view's notices may take (estimate units)."""
    room: int
    """The budget in estimate units."""
    trigger_estimate: int
    """The trigger in estimate units."""
    cold_floor: float
    quiet: float
    """Below this view (estimate units, the identity model: a walk's) no rule but the
    turn-start one fires: under the trigger, clear of the limit and of the cold floor."""
    quiet_warm: float
    """The same where the cache is known not to be cold."""

    @property
    def limit(self) -> int:
        """What the view may take, its notices aside (estimate units)."""
        return self.room - self.reserved

    def turn_aim(self, growth: int, cycle: int) -> int | None:
        """Where a turn-start escalation aims for a turn expected to add ``growth`` to its own
        requests and ``cycle`` as a whole (real units): low enough that the turn now starting
        and a whole number of turns after it stay below the trigger, never above the target
        nor below ``DEEPEST_TARGET_SHARE`` of it. ``None`` when not even the turn now starting
        fits above that floor: it escalates inside its loop whatever is done now."""
        trigger, target = self.trigger, self.target
        deepest = math.ceil(DEEPEST_TARGET_SHARE * target)
        first = trigger - growth
        if first < deepest:
            return None
        further = max(0, math.ceil((first - target) / max(cycle, 1)))
        return max(deepest, min(target, int(first - further * cycle)))


def thresholds(
    config: ContextConfig, effective: int, reserved: int, model: SizeModel = IDENTITY
) -> Thresholds:
    """The thresholds of a request compared with ``effective``, its notices taking up to
    ``reserved``, sized through ``model``."""
    usable = config.usable_budget(effective)
    trigger = config.trigger(effective)
    cold_floor = trigger - config.cold_cache_distance * usable
    # Over the limit is ``estimate > effective - reserved`` under the identity model.
    quiet_warm = min(trigger, effective - reserved)
    quiet = min(quiet_warm, cold_floor) if config.cache_ttl_seconds > 0 else quiet_warm
    return Thresholds(
        effective=effective,
        usable=usable,
        trigger=trigger,
        target=config.target(effective),
        reserved=reserved,
        room=model.to_estimate(effective),
        trigger_estimate=model.to_estimate(int(trigger)),
        cold_floor=cold_floor,
        quiet=quiet,
        quiet_warm=quiet_warm,
    )
