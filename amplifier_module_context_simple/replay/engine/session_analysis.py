"""What each request's window held and how the provider's cache served it, during a replay.

The replay calls :meth:`WindowAnalysis.observe` after every request. Two cases:

* The session recorded the request (an ``llm:request`` payload): the categories come from
  ``payload.breakdown`` over that payload, the provider's usage is put beside them, and
  ``cache_reuse.CacheTracker`` follows the cache from payload to payload. The replayed view
  already carries the recorded system prompt (the feed hands it to the manager), so what the
  view lacks is the tool definitions and the ephemeral injections: that is the request's
  ``overhead_tokens``. The view plus it is the whole request (``RequestRecord.request_tokens``),
  the one figure the summary's budget rows, the refusal checks and ``sweep`` read.
* A bare transcript: the categories are the replayed view's, with ``--overhead`` (when
  given) standing for what the transcript cannot show, and being the request's overhead; the
  report says the figures exclude whatever was not given.
* Usage recorded without a payload (a Claude Code log: ``RecordedRequest.messages_only``):
  the categories are the replayed view's, as for a bare transcript, with the provider's
  figure beside them; the cache is followed over the messages the log shows were sent (the
  same tracker, by the log's rule). The request's overhead is what the provider counted
  beyond those messages, so while the replayed view is the conversation the log sent, the
  whole request is the provider's own figure.
* A request the session did not record, after requests it did (the events file ends early: a
  crashed or still-running session): the categories are the replayed view's, its system
  prompt apart, with the last recorded request's tool definitions carried over (the replay's
  manager holds them back too); its injections and the provider's figure are unknown. The
  entry says it was not recorded (``WindowEntry.recorded``).

Only small records are kept per request (the categories and the injections found, not the
per-message matches), so a long replay stays linear in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ... import estimate_message_tokens
from ..payloads.payload import UsageComparison, WindowBreakdown, breakdown, compare, given_breakdown
from ..payloads.payload_match import TranscriptIndex, align
from ..provider.cache_reuse import CacheReport, CacheRequest, CacheTracker
from ..recordings.session_dir import RecordedRequest
from .view import is_notice

__all__ = [
    "BASIS_GIVEN",
    "BASIS_PAYLOAD",
    "BASIS_VIEW",
    "WindowAnalysis",
    "WindowEntry",
    "cache_json",
]

BASIS_PAYLOAD = "recorded request payloads"
BASIS_GIVEN = "the replayed views plus the --overhead given"
BASIS_VIEW = "the replayed views only (no payload recorded, no --overhead given)"


@dataclass(frozen=True)
class WindowEntry:
    """One request's window: its categories and, when recorded, the provider's figure."""

    request: int
    window: WindowBreakdown
    comparison: UsageComparison | None
    recorded: bool = True
    """False: no payload was recorded for this request (a bare transcript, or a session whose
    recording ends before it: see the module docstring)."""

    def as_json(self) -> dict[str, Any]:
        b = self.window
        return {
            "request": self.request,
            "recorded": self.recorded,
            "categories": dict(b.categories()),
            "used": b.used,
            "over": b.over,
            "injections": [
                {
                    "payload_message": i.message_index,
                    "block": i.block_index,
                    "attached_to": i.position,
                    "tokens": i.tokens,
                    "first_line": i.first_line,
                }
                for i in b.injections
            ],
            "provider": None if self.comparison is None else self.comparison.provider,
            "gap": None if self.comparison is None else self.comparison.gap,
            "tool_definitions": [p.as_json() for p in b.tool_parts],
            "system_parts": [p.as_json() for p in b.system_parts],
        }


class WindowAnalysis:
    """Collects the window and cache figures of a replay, one request at a time."""

    def __init__(
        self,
        *,
        family: str | None,
        context_window: int | None,
        max_output: int,
        overhead: int | None,
        history: Sequence[Mapping[str, Any]],
        sub_agents: Iterable[RecordedRequest] = (),
    ) -> None:
        self._family = family
        self._window = context_window
        self._max_output = max_output
        self._overhead = overhead
        self._history = history  # the manager's list: it grows as the replay goes
        # Indexed as it grows, once for the whole replay (not once per recorded request).
        self._index = TranscriptIndex(history)
        self.recorded_compacted = False
        """The request observed last was recorded after the session's own compaction (its
        payload carries the notice, a truncation marker or a stub)."""
        self._cache = CacheTracker(self._index, family=family)
        self._sub_agents = sub_agents
        self._recorded = 0
        self._usage_only = 0  # requests with recorded usage and no payload (messages_only)
        self._tools = 0  # the last recorded request's tool definitions
        self._notice: tuple[Mapping[str, Any], int] | None = None
        self.entries: list[WindowEntry] = []

    def follow(self, history: Sequence[Mapping[str, Any]]) -> None:
        """The manager's history is now ``history`` (a new list: the agent's own compaction
        started it afresh); recorded payloads are aligned with it from here on."""
        self._history = history
        self._index = TranscriptIndex(history)

    def observe(
        self,
        request: int,
        budget: int,
        view: Sequence[Mapping[str, Any]],
        recorded: RecordedRequest | None,
        *,
        view_tokens: int,
        system_tokens: int = 0,
        whole: bool = False,
    ) -> int:
        """Add ``request`` (its ``view`` of ``view_tokens``, and the session's ``recorded``
        request).

        Returns the request's overhead: what a provider receives beyond the view. Without a
        simulated window the categories are set against ``budget``. Without a recorded
        payload only the notice is estimated here (the caller has the view's sum), so the cost
        is not the view's length; ``system_tokens`` is the view's system prompt, apart from
        the conversation when earlier requests were recorded and this one was not. ``whole``:
        the view is the whole conversation (nothing was ever compacted), so the request is the
        provider's figure itself.
        """
        window = self._window if self._window is not None else budget
        self.recorded_compacted = False
        notice = next(filter(is_notice, view), None)
        notice_tokens = 0 if notice is None else self._notice_tokens(notice)
        comparison = None
        if recorded is not None and recorded.messages_only:
            # Usage without a payload to measure: the window is the view's, as for a bare
            # transcript, with the provider's figure beside it and its cache followed.
            self._usage_only += 1
            found = self._given(view_tokens, notice_tokens, window)
            comparison = compare(found, recorded.usage)
            if comparison is not None:  # room the provider counted that the log does not hold
                found = replace(found, unlogged=max(0, -comparison.gap))
            if recorded.usage is not None:  # a synthetic message: no request reached the cache
                self._cache.add(
                    request,
                    recorded.payload,
                    recorded.usage,
                    model=recorded.model,
                    messages_only=True,
                )
            self.entries.append(WindowEntry(request, found, comparison, recorded=False))
            if comparison is None:
                return self._overhead or 0
            # The provider counted the whole request: what it counted beyond the messages the
            # log shows were sent (system prompt, tools, framing) is this request's overhead.
            # While the view is that very conversation (stored messages price as the log's
            # do), the view plus it is the provider's figure itself.
            # The log's messages as sent may be split otherwise than the history's (consecutive
            # user messages joined): a whole view is priced against itself.
            sent = view_tokens if whole else self._cache.sent_tokens
            return max(0, comparison.provider - sent)
        if recorded is not None:
            self._recorded += 1
            # Aligned once, for the window's categories and the cache's causes alike.
            aligned = align(recorded.payload, self._index, family=self._family)
            found = breakdown(
                recorded.payload,
                self._history,
                family=self._family,
                context_window=window,
                max_output=self._max_output,
                notice_tokens=notice_tokens,
                aligned=aligned,
            )
            comparison = compare(found, recorded.usage)
            self._cache.add(
                request, recorded.payload, recorded.usage, model=recorded.model, aligned=aligned
            )
            self.recorded_compacted = self._cache.last_compacted
            overhead = found.tools + found.injected
            self._tools = found.tools
        elif self._recorded:
            # Past the end of the recording: the same columns as the recorded requests.
            found = WindowBreakdown(
                context_window=window,
                max_output=self._max_output,
                family=self._family,
                system=system_tokens,
                tools=self._tools,
                conversation=view_tokens - system_tokens - notice_tokens,
                injections=(),
                notice=notice_tokens,
            )
            overhead = self._tools
            self.entries.append(WindowEntry(request, found, None, recorded=False))
            return overhead
        else:
            found = self._given(view_tokens, notice_tokens, window)
            overhead = self._overhead or 0
        entry = WindowEntry(request, replace(found, messages=()), comparison, recorded is not None)
        self.entries.append(entry)
        return overhead

    def _given(self, view_tokens: int, notice_tokens: int, window: int) -> WindowBreakdown:
        """The window of a view with no payload to measure: the view and the given overhead."""
        return given_breakdown(
            conversation=view_tokens - notice_tokens,
            overhead=self._overhead or 0,
            family=self._family,
            context_window=window,
            max_output=self._max_output,
            notice_tokens=notice_tokens,
        )

    def _notice_tokens(self, notice: Mapping[str, Any]) -> int:
        # A sticky notice is the same dict from request to request: estimated once.
        if self._notice is None or self._notice[0] is not notice:
            self._notice = (notice, estimate_message_tokens(notice, family=self._family))
        return self._notice[1]

    @property
    def basis(self) -> str:
        if self._recorded:
            return BASIS_PAYLOAD
        return BASIS_GIVEN if self._overhead is not None else BASIS_VIEW

    @property
    def cache(self) -> CacheReport | None:
        """The provider's cache over the recorded requests (``None``: nothing recorded)."""
        if not (self._recorded or self._usage_only):
            return None
        return self._cache.report(self._sub_agent_requests())

    def _sub_agent_requests(self) -> tuple[CacheRequest, ...]:
        """The sub-agents' recorded requests, their cache followed apart from the session's."""
        tracker = CacheTracker(family=self._family)
        for r in self._sub_agents:
            if r.usage is not None:
                tracker.add(r.number, r.payload, r.usage, model=r.model, messages_only=True)
        return tracker.report().requests


def cache_json(report: CacheReport) -> dict[str, Any]:
    """The ``--json`` form of the provider's cache over a recorded session."""
    return {
        **_cache_rows(report),
        "sub_agent_requests": [_cache_row(r) for r in report.sub_agents],
    }


def _cache_rows(report: CacheReport) -> dict[str, Any]:
    return {
        "read": report.read,
        "occupancy": report.occupancy,
        "share": None if report.share is None else round(report.share, 4),
        "breaks": report.breaks,
        "causes": report.causes(),
        "requests": [_cache_row(r) for r in report.requests],
    }


def _cache_row(r: CacheRequest) -> dict[str, Any]:
    return {
        "request": r.number,
        "cache_read_tokens": r.cache_read,
        "cache_write_tokens": r.cache_write,
        "occupancy": r.occupancy,
        "break": r.is_break,
        "differs_at": None if r.difference is None else r.difference.where(),
        "position": None if r.difference is None else r.difference.position,
        "cause": None if r.difference is None else r.difference.cause,
        "read_reach": r.read_reach,
        "priced_input_tokens": _rounded(r.priced_input_tokens),
        "input_usd": _usd(r.input_dollars),
        "shared_tokens": r.shared_tokens,
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _usd(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
