"""What the provider's readings showed beyond what a request carried, as the budget holds it.

Two figures of one excess (a reading less the view and the tool definitions it answered):
``whole`` keeps all of it; ``fixed`` leaves out the estimator's bias, the part a fitted size
model's slope above 1 explains, which grows and shrinks with the view. Where the trigger
compares readings (``token_meter: actual``) the size model already converts that bias, so the
budget holds back ``fixed`` and a provider whose overhead is constant gets a constant budget.
Where it compares estimates, ``whole`` keeps the bias in the budget too. Both move in steps,
so a session's budget changes a handful of times, not on every reading.
"""

from __future__ import annotations

__all__ = ["OVERHEAD_DROP_SHARE", "OVERHEAD_STEP", "LearnedOverhead", "stepped"]

from dataclasses import dataclass

#: The learned overhead moves in steps of this many tokens, and comes down only when the
#: excess falls by more than two steps and ``OVERHEAD_DROP_SHARE`` of it.
OVERHEAD_STEP = 256
OVERHEAD_DROP_SHARE = 0.10


def stepped(held: int, excess: int) -> int:
    """The overhead to hold back after a reading showed ``excess`` over what was accounted.

    Raised at once to ``excess`` rounded up to ``OVERHEAD_STEP`` (never less than a reading
    showed); lowered only when the excess falls clearly below what is held. Never negative.
    A constant overhead read through a noisy estimate hovers at a step's edge and now and
    then rounds up to the next step: that step must not come down on the next reading (a
    step of room between the two rules), or every reading would move the budget.
    """
    excess = max(0, excess)
    up = -(-excess // OVERHEAD_STEP) * OVERHEAD_STEP
    if up > held or held - excess > max(2 * OVERHEAD_STEP, OVERHEAD_DROP_SHARE * held):
        return up
    return held


@dataclass(frozen=True, slots=True)
class LearnedOverhead:
    whole: int = 0
    fixed: int = 0

    def after(self, excess: int, bias: int) -> LearnedOverhead:
        """Both figures after a reading showed ``excess``, ``bias`` of it the estimator's."""
        return LearnedOverhead(stepped(self.whole, excess), stepped(self.fixed, excess - bias))

    def held(self, meter_mode: str) -> int:
        """What the budget holds back in ``meter_mode`` (``estimate`` or ``actual``)."""
        return self.fixed if meter_mode == "actual" else self.whole
