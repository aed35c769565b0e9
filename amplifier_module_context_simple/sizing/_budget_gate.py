"""``BudgetEventGate``: the last ``context:budget`` payload emitted, so the event is only sent
when the budget (or one of its parts) actually changes.
"""

from __future__ import annotations

__all__ = ["BudgetEventGate"]

from collections.abc import Mapping
from typing import Any


class BudgetEventGate:
    """Remembers the last emitted budget payload so repeats are not re-emitted.

    The caller asks ``changed()``, calls ``mark_emitted()`` before the emit's first await (so
    concurrent requests deliver one event per change) and ``restore()``s the ``snapshot()``
    taken before it when the emit fails.
    """

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    @property
    def last(self) -> dict[str, Any] | None:
        """A copy of the last emitted payload, or ``None``."""
        return dict(self._last) if self._last is not None else None

    def changed(self, payload: Mapping[str, Any]) -> bool:
        """True when ``payload`` differs from the last one emitted."""
        return self._last is None or dict(payload) != self._last

    def mark_emitted(self, payload: Mapping[str, Any]) -> None:
        """Record ``payload`` as emitted (copied, so later edits to it do not leak in)."""
        self._last = dict(payload)

    def snapshot(self) -> dict[str, Any] | None:
        """Capture the gate's state for a later ``restore``."""
        return self.last

    def restore(self, snapshot: dict[str, Any] | None) -> None:
        """Return to a state captured by ``snapshot``."""
        self._last = dict(snapshot) if snapshot is not None else None

    def reset(self) -> None:
        """Forget what was emitted, so the next payload counts as a change."""
        self._last = None
