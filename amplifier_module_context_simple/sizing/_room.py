"""The view's room in estimate units, and when a later room disproves an earlier one.

Decisions are sticky: what an escalation left out stays out. That is right while the budget
they were made under holds, and wrong once later readings show it was far too small (one
inflated reading believed, usage summed over a provider's internal calls for a while). The
room is the budget the planner compares in estimate units (the real budget converted through
the size model), so it moves with the learned overhead and the model alike. Decisions made
under a room that a later one exceeds by more than ``DISPROVED_SHARE`` of itself are
*disproved*: the next escalation starts from no decisions instead of building on them.
"""

from __future__ import annotations

__all__ = ["DISPROVED_SHARE", "disproved", "made_under"]

#: A room is disproved when a later one is larger by more than this share of the later one
#: (a quarter: the ordinary moves of the learned overhead and the model stay well inside it).
DISPROVED_SHARE = 0.25


def disproved(made_under: int | None, room: int) -> bool:
    """Whether decisions made under a room of ``made_under`` tokens (None: no decisions)
    are disproved by the room of ``room`` tokens in force now."""
    return made_under is not None and room - made_under > DISPROVED_SHARE * room


def made_under(previous: int | None, room: int, *, rebased: bool) -> int:
    """The room the decisions in force are made under after an escalation at ``room``.

    An escalation that started from no decisions (``rebased``) or from none in force made
    them all under ``room``; one that built on the decisions in force keeps the smallest room
    any of them was made under, so a slow creep of rooms cannot hide a disproved one.
    """
    if rebased or previous is None:
        return room
    return min(previous, room)
