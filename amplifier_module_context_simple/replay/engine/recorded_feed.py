"""Feeding a session's recorded requests into a replay, one per request the replay makes.

Before request k the manager's system prompt factory returns recorded request k's system text
(the view then carries the system prompt the session really sent) and, when the payload
recorded its ``tools``, the manager is told them through ``set_tool_definitions`` (the budget
then holds them back as the live module, told the coordinator's mounted tools, would; a payload
without ``tools`` leaves the last ones in force); after it, the recorded usage goes to the
meter's ``llm:response`` handler, shaped as the host delivers it (a log of another agent's
session: only while the view is the conversation that agent sent, see
:meth:`RecordedFeed.after`). The requests are consumed as the replay goes, so only one
recorded payload is alive at a time. When the replay outlives the recording, the last system
prompt stays and no usage follows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from ... import SimpleContextManager
from ...readings._usage import parse_usage_reading
from ..recordings.session_dir import RecordedRequest, system_text
from .report import ReplayReport

__all__ = ["RecordedFeed"]

_RESPONSE = "llm:response"


class RecordedFeed:
    """Recorded requests handed to a replay's manager in order; counts how many matched."""

    def __init__(self, recorded: Iterable[RecordedRequest]) -> None:
        self._requests = iter(recorded)
        self.matched = 0
        self.found = 0
        """Recorded usages that hold a reading the meter can take (an input figure)."""
        self.fed = 0
        """Of those, the readings handed to the meter."""
        self.withheld = 0
        """Of those, the readings kept from the meter (see :meth:`after`)."""
        self._tools: list[Any] | None = None

    async def before(self, manager: SimpleContextManager) -> RecordedRequest | None:
        """Set the next recorded request's system prompt; return that request (``None``: none)."""
        request = next(self._requests, None)
        if request is None:
            return None
        self.matched += 1
        text = system_text(request.payload)
        await manager.set_system_prompt_factory(None if text is None else _constant(text))
        tools = request.payload.get("tools")
        # Told again only when the list changed: the manager's cache keys on the tool objects,
        # so handing it each payload's fresh copy would re-estimate the same tools every request.
        if isinstance(tools, list) and tools != self._tools:
            self._tools = cast("list[Any]", tools)
            manager.set_tool_definitions(self._tools)
        return request

    async def after(
        self,
        manager: SimpleContextManager,
        request: RecordedRequest | None,
        *,
        view_whole: bool = True,
        sent_whole: bool = True,
    ) -> None:
        """Deliver ``request``'s recorded usage to the meter, as the host's hook would.

        ``view_whole``: the replayed view sent the whole history unchanged; ``sent_whole``:
        so did the recorded request (its payload shows no compaction of the session's own).
        A recorded reading answered what the session sent; it is given to the meter only
        while the replayed view is that same conversation, the whole history on both sides,
        since a reading paired with another view teaches the meter an overhead that is not
        there (a replay under a smaller cap would learn the history it left out as overhead,
        and compact again at the next request).
        """
        if request is None or request.usage is None:
            return
        if parse_usage_reading(request.usage.raw) is None:
            return  # no reading to give: counted neither as found nor as fed
        self.found += 1
        if not (view_whole and sent_whole):
            self.withheld += 1
            return
        self.fed += 1
        data: dict[str, Any] = {"usage": dict(request.usage.raw)}
        if request.model:
            data["model"] = request.model
        await manager.meter.on_llm_response(_RESPONSE, data)

    def finish(self, report: ReplayReport, *, complete: bool) -> None:
        """Put ``{"recorded", "replayed", "matched"}`` in ``report.source["recorded_match"]``
        and ``{"found", "fed", "withheld"}`` (the readings) in ``recorded_readings``.

        When the counts differ, a warning says how many were matched. ``complete=False`` (the
        replay stopped early on purpose): the rest of the recording is not counted.
        """
        replayed = len(report.requests)
        recorded = self.matched + sum(1 for _ in self._requests) if complete else None
        summary = {"recorded": recorded, "replayed": replayed, "matched": self.matched}
        report.source["recorded_match"] = summary
        readings = {"found": self.found, "fed": self.fed, "withheld": self.withheld}
        report.source["recorded_readings"] = readings
        if self.withheld:
            note = (
                f"{self.withheld:,} recorded reading(s) not given to the replay's meter: the "
                "replayed view was not the conversation the session sent (after a compaction, "
                "the replay's or the session's own), so they would teach it a false overhead; "
                "they are still reported beside the views"
            )
            # A new list: a sweep replays the same source again.
            report.source["session_notes"] = [*report.source.get("session_notes", []), note]
        # Fewer recorded than replayed with the rest named as not recorded: the report's
        # "Partial session" line says it already.
        partial = recorded is not None and recorded < replayed and bool(report.not_recorded)
        if recorded is not None and recorded != replayed and not partial:
            warning = (
                f"the session recorded {recorded} request(s) and the replay made {replayed}: "
                f"the first {self.matched} were matched to recorded system prompts and usage"
            )
            report.warnings[warning] = 1


def _constant(text: str) -> Any:
    def factory() -> str:
        return text

    return factory
