"""``MeasuredTransaction``: a measured request's staged plan, committed right before dispatch.

The counted walk (``_measured``) stages the plan; the orchestrator commits it or rolls it
back, and only a commit hands it to the one delivery routine (``_session.deliver``).
"""

from __future__ import annotations

__all__ = ["MeasuredTransaction"]

import logging
from collections.abc import Callable
from typing import Any

from ..planning._plan import RequestPlan
from ..views._decisions import CompactionStats
from ._session import SessionState, deliver

# Logged under the counted walk's name, as before the transaction had a module of its own
# (log filters name it).
logger = logging.getLogger(__name__.removesuffix("_transaction"))


class MeasuredTransaction:
    """Staged state of one measured call; the orchestrator commits right before dispatch.

    It holds the session state, the hooks and the plan; ``commit`` hands them to the one
    delivery routine (``_session.deliver``) and steers it as its guard.
    """

    def __init__(
        self, state: SessionState, hooks: object, plan: RequestPlan, extra: dict[str, Any]
    ) -> None:
        self._state = state
        self._hooks = hooks
        self._plan = plan
        self._extra = extra
        self._answer: bool | None = None
        self._delivering = False
        self._started = False
        self._rollback_asked = False
        self._is_cancelled: Callable[[], bool] | None = None

    @property
    def done(self) -> bool:
        return self._answer is not None

    def rollback(self) -> None:
        """Discard the staged decisions (idempotent; terminal).

        Called while ``commit`` is delivering ``context:compaction``, it makes that commit
        undo the compaction and return False.
        """
        if self._answer is not None:
            return
        if self._delivering:
            self._rollback_asked = True
        else:
            self._answer = False

    async def commit(self, *, is_cancelled: Callable[[], bool] | None = None) -> bool:
        """Make the staged decisions sticky and emit the staged event.

        Returns False, having rolled back, when the caller was cancelled or the state moved on
        underneath (another request escalated meanwhile). When ``rollback()`` is called during
        the ``context:compaction`` delivery, or ``is_cancelled()`` is true once it finishes,
        the compaction state goes back to what it was before (meter readings that arrived
        meanwhile are kept), a warning names the event hooks saw, and the answer is False.
        A cancellation raised while the event is delivered keeps the compaction (delivery
        had started). A second call repeats the answer.
        """
        if self._answer is not None:
            return self._answer
        if self._delivering:
            return False  # re-entered from a hook during delivery: not dispatchable yet
        if is_cancelled is not None and is_cancelled():
            self._answer = False
            return False
        self._is_cancelled = is_cancelled
        # Nothing staged: the request is recorded as an ordinary one would be, unless another
        # request escalated meanwhile (this counted view is then not what would go out).
        try:
            # Cancelled before the commit, nothing has changed and a retry may still commit.
            ok = await deliver(self._state, self._hooks, self._plan, extra=self._extra, guard=self)
        except BaseException:
            if self._started and self._answer is None:
                self._answer = True  # delivery started: the compaction is retained
            raise
        if self._answer is None:
            self._answer = ok
        return self._answer

    def _cancelled(self) -> bool:
        return self._is_cancelled is not None and self._is_cancelled()

    # The delivery guard (see ``_session.DeliveryGuard``).

    def proceed(self) -> bool:
        if self._answer is not None:  # rolled back while pre_compact was delivered
            return False
        if self._cancelled():
            self._answer = False
            return False
        return True

    def delivering(self, active: bool) -> None:
        self._delivering = active
        self._started = self._started or active

    def keep(self, stats: CompactionStats) -> bool:
        if self._rollback_asked or self._cancelled():
            self._answer = False
            logger.warning(
                "context-simple: the measured request was rolled back after context:compaction "
                "was delivered; hooks saw a compaction (level %s, %s messages removed, %s "
                "truncated) that did not take effect",
                stats.strategy_level,
                stats.messages_removed,
                stats.messages_truncated,
            )
            return False
        self._answer = True
        return True
