"""What a provider would refuse, predicted from a replay's request records.

A view is *refused* when a provider would turn the request down:

* **above the window**: the whole request (``RequestRecord.request_tokens``: the view, with
  its system prompt, plus what the request carries besides it, the recorded tool definitions
  and injections or the ``--overhead`` given) plus the requested output (the window's
  ``max_output_tokens``) exceed the context window. Only judged when a window is known
  (simulated, from the session, or ``--context-window``).
* **invalid**: ``check_view`` found a violation (duplicated tool-call ids included) or the
  host's message model refused the view (``RequestRecord.valid`` is false).

The summary's "over the budget" judges the same whole request against the request budget
(``RequestRecord.over_budget``: the window less the output the budget held back and the margin,
capped by ``max_tokens``). That limit is never above the provider's while the budget holds back
the output the provider is asked for, so a request above the window is over the budget too;
the one way a request within the budget is still refused is an output held back short of the
one asked for (``output_reserve_fraction`` below 1, or a window so small the budget keeps a
quarter of it for the input). ``RefusalReport.within_budget`` counts those, and each one's
reason says so.

Two patterns are flagged without counting as refusals, since a provider accepts each view:

* an **over-budget streak**: :data:`STREAK_MIN` or more consecutive requests over the budget
  (``RequestRecord.over_budget``); the longest run is reported;
* a **compaction storm**: :data:`STORM_MIN` or more consecutive requests that each compacted,
  i.e. re-compaction on every request; the longest run is reported.

The repairs the views needed (``view_repairs`` after each request) are counted by kind: in how
many views the kind appeared, and how many distinct repairs of that kind the replay saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..provider.simulation import Window
from .records import RequestRecord

__all__ = [
    "STORM_MIN",
    "STREAK_MIN",
    "RefusalReport",
    "RepairCount",
    "Replayed",
    "RequestVerdict",
    "Run",
    "assess",
    "longest_run",
    "needed_tokens",
    "repair_kind",
]

STREAK_MIN = 2
"""Consecutive over-budget requests from which a streak is flagged."""
STORM_MIN = 3
"""Consecutive compacting requests from which a storm is flagged."""


@dataclass(frozen=True)
class Run:
    """The longest run of consecutive requests with a property (``length`` 0: none)."""

    length: int = 0
    first_request: int = 0
    last_request: int = 0


@dataclass(frozen=True)
class RequestVerdict:
    """Why a provider would refuse one request."""

    request: int
    above_window: bool
    invalid: bool
    reasons: list[str]
    within_budget: bool = False
    """Above the window though within the module's budget: the provider's rule is stricter
    (it is asked for more output than the budget held back)."""


@dataclass(frozen=True)
class RepairCount:
    views: int
    """Views in which the kind appeared."""
    distinct: int
    """Distinct repairs of the kind over the replay (the same repair on every view is one)."""


@dataclass(frozen=True)
class RefusalReport:
    """What a provider would refuse, and the patterns worth a look."""

    requests: int
    context_window: int | None
    """The window views were judged against; ``None``: none known, above-window not judged."""
    max_output_tokens: int | None
    refused: list[RequestVerdict] = field(default_factory=list[RequestVerdict])
    """Only the requests a provider would refuse."""
    longest_over_budget: Run = Run()
    longest_compaction_run: Run = Run()
    repairs: dict[str, RepairCount] = field(default_factory=dict[str, RepairCount])
    not_recorded: list[int] = field(default_factory=list[int])
    """Requests a recorded session has no payload for: judged without their injections."""

    @property
    def refused_views(self) -> int:
        return len(self.refused)

    @property
    def above_window(self) -> int:
        return sum(v.above_window for v in self.refused)

    @property
    def invalid(self) -> int:
        return sum(v.invalid for v in self.refused)

    @property
    def within_budget(self) -> int:
        """Requests above the window that the module's budget allowed (see the module doc)."""
        return sum(v.within_budget for v in self.refused)

    @property
    def over_budget_streak(self) -> bool:
        return self.longest_over_budget.length >= STREAK_MIN

    @property
    def storm(self) -> bool:
        return self.longest_compaction_run.length >= STORM_MIN

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            refused_views=self.refused_views,
            above_window=self.above_window,
            invalid=self.invalid,
            within_budget=self.within_budget,
            over_budget_streak=self.over_budget_streak,
            storm=self.storm,
            streak_min=STREAK_MIN,
            storm_min=STORM_MIN,
        )
        return data


def needed_tokens(record: RequestRecord, window: Window | None) -> int:
    """What the request asks of the window: the whole request and the requested output."""
    output = window.max_output_tokens if window is not None else 0
    return record.request_tokens + output


def repair_kind(entry: str) -> str:
    """The kind of one ``view_repairs`` entry (``"kind: detail"``)."""
    return entry.split(":", 1)[0].strip()


def longest_run(requests: Iterable[RequestRecord], test: Callable[[RequestRecord], bool]) -> Run:
    """The longest run of consecutive requests for which ``test`` holds (the first, on ties)."""
    best, start, length = Run(), 0, 0
    for record in requests:
        if not test(record):
            length = 0
            continue
        start = record.request if length == 0 else start
        length += 1
        if length > best.length:
            best = Run(length, start, record.request)
    return best


class Replayed(Protocol):
    """What :func:`assess` reads of a replay's report (``report.ReplayReport`` has it)."""

    requests: list[RequestRecord]
    window: Window | None
    repairs: dict[str, int]
    not_recorded: list[int]


def assess(report: Replayed) -> RefusalReport:
    """The refusals and patterns of a replay (see the module docstring for the definitions)."""
    window = report.window
    refused = [v for r in report.requests if (v := _verdict(r, window)) is not None]
    views: dict[str, int] = {}
    for record in report.requests:
        for kind in record.repairs:
            views[kind] = views.get(kind, 0) + 1
    return RefusalReport(
        requests=len(report.requests),
        context_window=window.context_window if window is not None else None,
        max_output_tokens=window.max_output_tokens if window is not None else None,
        refused=refused,
        longest_over_budget=longest_run(report.requests, lambda r: r.over_budget),
        longest_compaction_run=longest_run(report.requests, lambda r: r.compacted),
        repairs=_repairs(views, report.repairs),
        not_recorded=list(report.not_recorded),
    )


def _verdict(record: RequestRecord, window: Window | None) -> RequestVerdict | None:
    reasons: list[str] = []
    above = window is not None and needed_tokens(record, window) > window.context_window
    within = above and not record.over_budget
    if above and window is not None:
        reasons.append(
            f"above the window: {record.view_tokens:,} view + {record.overhead_tokens:,} "
            f"overhead + {window.max_output_tokens:,} output = "
            f"{needed_tokens(record, window):,} > {window.context_window:,}"
            + (_stricter(record, window) if within else "")
        )
    reasons += [f"invalid: {v}" for v in record.violations]
    if not record.valid and not record.violations:
        reasons.append("invalid")  # a record marked invalid with no violation text
    if not reasons:
        return None
    return RequestVerdict(record.request, above, not record.valid, reasons, within)


def _stricter(record: RequestRecord, window: Window) -> str:
    """Why a request within the module's budget is above the window: the provider's rule."""
    return (
        f" (within the module's {record.request_budget:,}-token request budget: the provider "
        f"reserves the {window.max_output_tokens:,} output tokens it is asked for, the budget "
        f"held back {record.reserved_output:,})"
    )


def _repairs(views: Mapping[str, int], distinct: Mapping[str, int]) -> dict[str, RepairCount]:
    kinds: Sequence[str] = sorted(set(views) | set(distinct))
    return {k: RepairCount(views.get(k, 0), distinct.get(k, 0)) for k in kinds}
