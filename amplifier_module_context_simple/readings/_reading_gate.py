"""Whether a provider reading can be believed as the size of the request it answers.

A reading far above what the request carried is not the request's size: a provider that sums
the usage of its internal calls, a server-held history (response chaining), or a corrupt
figure. Believed, one such reading becomes the learned overhead and the size model's overhead
at once, and the session is compacted to its floor for good. So a reading is *implausible*
when it exceeds the request's whole input room (what the request could hold before
``max_tokens`` caps it) and is more than ``IMPLAUSIBLE_FACTOR`` times what the request carried
(the view and the tool definitions). An implausible reading answers nothing and is reported
(``Rejection``, a rate-limited warning); the next reading that answers a view confirms it
when it is implausible too, and is then believed like any other (a provider that really holds
that much is then reported as crowding the view out by the budget's own warnings).
"""

from __future__ import annotations

__all__ = ["IMPLAUSIBLE_FACTOR", "ReadingGate", "Rejection", "implausible"]

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: A reading is implausible only when it is more than this many times what the request
#: carried (and above its whole input room): an estimator a little off is not a bad reading.
IMPLAUSIBLE_FACTOR = 2


def implausible(reading: int, carried: int | None, room: int | None) -> bool:
    """Whether ``reading`` cannot be the size of a request that carried ``carried`` tokens
    and could hold ``room`` (either unknown: it is believed)."""
    if carried is None or room is None:
        return False
    return reading > room and reading > IMPLAUSIBLE_FACTOR * carried


@dataclass(frozen=True, slots=True)
class Rejection:
    """One reading that was not believed (the ``context:reading_rejected`` payload)."""

    reading: int
    carried: int
    room: int
    rejections: int
    """How many readings the session has rejected so far, this one included."""

    def payload(self) -> dict[str, Any]:
        return {
            "reading_tokens": self.reading,
            "carried_tokens": self.carried,
            "input_room": self.room,
            "rejections": self.rejections,
        }


class ReadingGate:
    """Rejects an implausible reading until the next answering reading confirms it.

    ``held`` and ``rejections`` are the gate's state (the meter snapshots them); the
    rejections not yet handed over are kept apart, for ``take``.
    """

    def __init__(self) -> None:
        self.held = False
        self.rejections = 0
        self._reports: list[Rejection] = []

    def admit(self, reading: int, carried: int | None, room: int | None, *, report: bool) -> bool:
        """Whether ``reading`` (answering a view that carried ``carried`` and could hold
        ``room``) is believed. ``report``: log and queue a rejection (not on a replay)."""
        if carried is None or room is None or not implausible(reading, carried, room):
            self.held = False
            return True
        if self.held:  # two in a row: the provider means it
            self.held = False
            return True
        self.held = True
        self.rejections += 1
        if report:
            rejection = Rejection(reading, carried, room, self.rejections)
            self._reports.append(rejection)
            _warn(rejection)
        return False

    def take(self) -> tuple[Rejection, ...]:
        """The rejections not handed over yet (each is handed over once)."""
        taken = tuple(self._reports)
        self._reports.clear()
        return taken


def _warn(rejection: Rejection) -> None:
    # Rate-limited: the 1st, 2nd, 4th, 8th... rejection of a session is a warning.
    count = rejection.rejections
    level = logging.WARNING if count & (count - 1) == 0 else logging.DEBUG
    logger.log(
        level,
        "context-simple: the provider reported %s input tokens for a request that carried "
        "~%s and could hold at most %s: server-held history or summed usage? The reading is "
        "not used until the next one confirms it (%d rejected so far)",
        f"{rejection.reading:,}",
        f"{rejection.carried:,}",
        f"{rejection.room:,}",
        count,
    )
