"""Replaying a conversation through a real ``SimpleContextManager``, request by request.

A replay does what an orchestrator does: before every assistant message it asks the manager
for a view, then adds the assistant message; every other message is simply added, and so is
a display-only row (``_public.answers_a_request``: no model wrote it, so no request preceded
it). Each request
is recorded (``report.RequestRecord``) with the history and view sizes, the whole request's
size (the view plus the overhead ``session_analysis`` finds: ``RequestRecord.request_tokens``),
the budget in force (the view's, and the request budget that whole request is held to), what
compaction changed and whether the view is valid and prefix-stable.

"Valid" means both checks an orchestrator's request goes through: ``check_view(view,
history=...)`` against the whole history so far (pairing, unique ids, the turn invariants), and
the host's own model (``host_check``), where amplifier-core is installed. Both are incremental,
so a replay stays linear in the transcript: ``ViewChecker`` keeps the history facts up to date
as messages are added, and the host check caches its verdict per history message.

The messages may be any iterable (a transcript streamed line by line), and nothing that grows
with the history is kept per request but the small ``RequestRecord``.

With ``recorded`` requests (a session directory's), request k gets recorded request k's system
prompt through the manager's system prompt factory, and afterwards its recorded usage through
the meter's ``llm:response`` handler, as the host would deliver them.

An agent's own compaction (``boundaries``: where in the messages the agent's history started
afresh at its summary) is replayed as the agent sent it: the manager's history is cleared there
(``clear()``, the runtime's own new-history call), so each later view holds that segment only.
The per-view checks and trackers start afresh with it (the views either side of a boundary are
never compared), while the request numbers, the report's totals and the simulated provider
cache run on across segments; the first view after a boundary is a new prefix, which that cache
sees as a break.

No third-party dependency: the command line, tables and plots live in the sibling modules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ... import ContextConfig, SimpleContextManager, estimate_message_tokens
from ...checks._invariants import ViewChecker, shared_start
from ...sizing._estimate import family_for_model
from ...vocabulary import _events as events
from ...vocabulary._public import answers_a_request
from ..findings.drops import DropTracker
from ..findings.evidence import EvidenceTracker
from ..findings.records import request_budget
from ..findings.refusals import repair_kind
from ..provider.replay_cache import ReplayCache
from ..provider.simulation import SimulatedProvider, Window
from ..recordings.session_dir import RecordedRequest
from .given_overhead import stand_in_definitions
from .host_check import HOST_CHECK_NOT_RUN, HOST_CHECK_RUN, HostModelCheck
from .recorded_feed import RecordedFeed
from .report import CompactionRecord, ReplayReport, RequestRecord
from .session_analysis import WindowAnalysis
from .session_settings import add_budget_setting
from .view import is_notice
from .view_tally import ViewTally

__all__ = ["ReplayError", "ReplayOutcome", "replay"]

_PACKAGE_LOGGER = "amplifier_module_context_simple"
_MAX_WARNINGS = 20


class ReplayError(Exception):
    """The replay cannot go on (a message the manager rejects); the text is one line."""


class _Recorder:
    """The hooks object handed to the manager: keeps the events since the last ``take``.

    Only the latest request's events are kept (a replay of thousands of requests would
    otherwise hold every event); the ingress truncations are counted as they come.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.ingress_truncations = 0

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        if event == events.INGRESS_TRUNCATED:
            self.ingress_truncations += 1
        self.events.append((event, data))

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        taken, self.events = self.events, []
        return taken


class _WarningCollector(logging.Handler):
    """Collects the module's log warnings so they are reported instead of interleaved."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().splitlines()[0] if record.getMessage() else ""
        self.seen[text] = self.seen.get(text, 0) + 1


@dataclass
class _SegmentTrackers:
    """What follows one segment's views (the whole replay when the agent never compacted)."""

    checker: ViewChecker
    host: HostModelCheck
    tally: ViewTally
    drops: DropTracker
    evidence: EvidenceTracker
    start: int = 0
    """The segment's first message, in the replayed messages."""
    history_tokens: int = 0
    """The report's history tokens before the segment: earlier segments' messages."""
    indexed: int = 0
    """History messages whose estimate has been read from the manager's index."""
    previous_prefix: Sequence[Mapping[str, Any]] | None = None
    previous_view: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    @classmethod
    def begin(
        cls, report: ReplayReport, known: dict[int, int], family: str | None, start: int = 0
    ) -> _SegmentTrackers:
        return cls(
            checker=ViewChecker(report.config.max_tool_result_bytes),
            host=HostModelCheck(),
            tally=ViewTally(family, known),
            # Positions count from the first replayed message, across segments.
            drops=DropTracker(family, drops=report.drops, known=known, offset=start),
            evidence=EvidenceTracker(records=report.evidence),  # what the next message used
            start=start,
            history_tokens=report.history_tokens,
        )


@dataclass
class ReplayOutcome:
    report: ReplayReport
    view: list[dict[str, Any]] | None
    """The view of the request the replay stopped at (``stop_at``), else ``None``."""
    history: list[dict[str, Any]]
    """The manager's history when the replay ended, after the stored messages of the segments
    before its last boundary: positions are the replayed messages'."""
    history_start: int = 0
    """Where in ``history`` the manager's own begins (the last boundary passed: the agent's
    own compaction started it afresh there); what came before is no view's to send."""


async def replay(
    messages: Iterable[Mapping[str, Any]],
    *,
    config: ContextConfig,
    window: Window | None,
    source: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    stop_at: int | None = None,
    recorded: Iterable[RecordedRequest] | None = None,
    overhead: int | None = None,
    sub_agents: Iterable[RecordedRequest] = (),
    boundaries: Collection[int] = (),
) -> ReplayOutcome:
    """Feed ``messages`` through a manager and report on every request.

    With ``stop_at`` (a 1-based request number) the replay stops right after that request
    and the outcome carries its view; otherwise the whole conversation is replayed. Raises
    :class:`ReplayError` when the manager refuses a message. ``recorded``: the session's
    requests, matched to the replay's in order (see the module docstring). ``overhead``:
    tokens every request carries beyond the view: the replayed budget holds it back
    (``given_overhead``) for every format, unless a recorded payload lists its tools (they
    are held back instead); the window analysis counts it where no payload was recorded
    (``session_analysis``). ``sub_agents``: the requests the session's sub-agents made,
    which are not replayed but are counted in the recorded cache and cost. ``boundaries``:
    the 0-based positions in ``messages`` where the agent's own compaction started its history
    afresh (see the module docstring).
    """
    report = ReplayReport(source=dict(source or {}), config=config, window=window)
    report.recorded_session = recorded is not None
    recorder = _Recorder()
    # Collecting from before the manager is built: its constructor warns about settings.
    collector = _WarningCollector()
    package_logger = logging.getLogger(_PACKAGE_LOGGER)
    package_logger.addHandler(collector)
    manager = SimpleContextManager(**asdict(config), hooks=recorder)
    provider = SimulatedProvider(window) if window is not None else None
    family = config.token_family or family_for_model(window.model if window else None)
    report.token_family = family
    if overhead:  # held back as mount holds back the mounted tools (a recorded tools list wins)
        manager.set_tool_definitions(stand_in_definitions(overhead, family))
    repairs: set[str] = set()  # distinct view_repairs entries: the same repair every view is one
    # id(history dict or what the view sends for it) -> tokens, from the manager's own index:
    # each message is estimated once, by the manager (the index keeps both objects alive).
    known: dict[int, int] = {}
    segment = _SegmentTrackers.begin(report, known, family)
    earlier: list[dict[str, Any]] = []  # the stored messages of the segments before this one
    simulated = ReplayCache(family, known)  # the provider's cache over these views
    report.host_check = HOST_CHECK_RUN if segment.host.available else HOST_CHECK_NOT_RUN
    feed = RecordedFeed(recorded) if recorded is not None else None
    analysis = WindowAnalysis(
        family=family,
        context_window=window.context_window if window is not None else None,
        max_output=window.max_output_tokens if window is not None else 0,
        overhead=overhead,
        history=manager.messages,
        sub_agents=sub_agents,
    )
    try:
        for position, message in enumerate(messages):
            if position in boundaries and position:
                _count_unindexed(manager, segment, report)
                earlier += manager.messages
                await manager.clear()
                # The old history's objects may now be freed and their ids reused.
                known.clear()
                segment = _SegmentTrackers.begin(report, known, family, position)
                analysis.follow(manager.messages)
            if answers_a_request(message):
                pending = await feed.before(manager) if feed is not None else None
                recorder.take()  # what admission emitted is not this request's
                view = await manager.get_messages_for_request(provider=provider)
                segment.indexed = _read_estimates(manager, segment.indexed, known, report)
                fresh = recorder.take()
                # Counted once for the four per-view checks and tallies, which each carry the
                # previous view's figures over for this shared head.
                shared = shared_start(segment.previous_view, view)
                segment.previous_view = list(view)
                record = _record(report, manager.messages, segment, view, fresh, shared=shared)
                record.request = len(report.requests) + 1
                record.at_message = position
                record.level = manager.compaction_level
                record.prefix_stable = _extends(segment.previous_prefix, view, shared)
                record.repairs = _count_kinds(manager.view_repairs)
                # Without a simulated window the categories fill what the whole request may
                # take (tools and overhead are in the categories too).
                record.overhead_tokens = analysis.observe(
                    record.request, record.request_budget, view, pending,
                    view_tokens=record.view_tokens, system_tokens=record.system_prompt_tokens,
                    whole=manager.compaction_level == 0,
                )  # fmt: skip
                if feed is not None and pending is None:
                    report.not_recorded.append(record.request)
                record.simulated_priced_input_tokens = simulated.add(
                    view,
                    tool_tokens=int((report.budget_event or {}).get("tool_definitions_tokens", 0)),
                    model=(pending.model if pending else None)
                    or (window.model if window else None),
                    shared=shared,
                )
                # Only now is the whole request known (the overhead is the analysis's).
                record.utilisation = _share(record.request_tokens, record.request_budget)
                repairs.update(manager.view_repairs)
                report.requests.append(record)
                _note_compaction(report, record, fresh)
                level = report.compactions[-1].level if record.compacted else record.level
                segment.drops.observe(
                    record.request, view, manager.messages, level=level,
                    compacted=record.compacted, shared=shared,
                )  # fmt: skip
                segment.evidence.observe(
                    record.request, view, manager.messages, message, shared=shared
                )
                segment.previous_prefix = view
                if feed is not None:
                    whole = not (record.left_out or record.shortened or record.stubs)
                    await feed.after(
                        manager, pending, view_whole=whole and not record.notice,
                        sent_whole=not analysis.recorded_compacted,
                    )  # fmt: skip
                if stop_at is not None and record.request == stop_at:
                    report.repairs = _count_kinds(repairs)
                    report.simulated_cost = simulated.cost()
                    _finish(report, collector, recorder, feed, analysis, complete=False)
                    return ReplayOutcome(report, view, [*earlier, *manager.messages], segment.start)
            try:
                await manager.add_message(dict(message))
            except (TypeError, ValueError) as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ReplayError(
                    f"message {position + 1} was rejected by the context manager: {text}"
                ) from None
            report.history_messages += 1
            if progress is not None:
                progress(1)
    finally:
        package_logger.removeHandler(collector)
    _count_unindexed(manager, segment, report)
    report.repairs = _count_kinds(repairs)
    report.simulated_cost = simulated.cost()
    _finish(report, collector, recorder, feed, analysis)
    return ReplayOutcome(report, None, [*earlier, *manager.messages], segment.start)


def _read_estimates(
    manager: SimpleContextManager, indexed: int, known: dict[int, int], report: ReplayReport
) -> int:
    """Take the estimates of the messages the manager indexed since the last request."""
    facts = manager.planner.index.facts
    for f in facts[indexed:]:
        known[id(f.message)] = known[id(f.sent)] = f.tokens
        report.history_tokens += f.tokens
    return len(facts)


def _count_unindexed(
    manager: SimpleContextManager, segment: _SegmentTrackers, report: ReplayReport
) -> None:
    """Add the history messages no request indexed (added after the segment's last one)."""
    for stored in manager.messages[segment.indexed :]:
        report.history_tokens += estimate_message_tokens(stored, family=report.token_family)


def _finish(
    report: ReplayReport,
    collector: _WarningCollector,
    recorder: _Recorder,
    feed: RecordedFeed | None,
    analysis: WindowAnalysis,
    *,
    complete: bool = True,
) -> None:
    report.ingress_truncations = recorder.ingress_truncations
    report.warnings = dict(list(collector.seen.items())[:_MAX_WARNINGS])
    add_budget_setting(report.source, report.budget_event, report.initial_budget_event)
    report.windows, report.window_basis, report.cache = (
        analysis.entries,
        analysis.basis,
        analysis.cache,
    )
    if feed is not None:
        feed.finish(report, complete=complete)


def _count_kinds(entries: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries:
        kind = repair_kind(entry)
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def _record(
    report: ReplayReport,
    history: Sequence[Mapping[str, Any]],
    segment: _SegmentTrackers,
    view: list[dict[str, Any]],
    fresh: list[tuple[str, dict[str, Any]]],
    *,
    shared: int,
) -> RequestRecord:
    for name, data in fresh:
        if name == events.BUDGET:
            report.budget_event = dict(data)
            if report.initial_budget_event is None:
                report.initial_budget_event = dict(data)
    budget = report.budget_event or {}
    effective = int(budget.get("effective_budget", 0))
    sums = segment.tally.sums(view, shared=shared)
    view_tokens, repaired = sums.tokens, sums.repaired
    notice = any(map(is_notice, view))
    compaction = next((d for name, d in fresh if name == events.COMPACTION), None)
    # Against the whole history, as check_view(view, history=history): the turn invariants
    # compare the view's structure with the history's. The checker has read the history as it
    # grew, so this costs the view's length, not the history's.
    violations = segment.checker.check(view, history, shared=shared)
    host_problems = segment.host.check(view, shared=shared)
    violations += host_problems or []
    return RequestRecord(
        request=0,
        at_message=0,
        history_messages=len(history),
        history_tokens=report.history_tokens - segment.history_tokens,
        view_messages=len(view),
        view_tokens=view_tokens,
        system_prompt_tokens=sums.system_prompt,
        added_tokens=sums.added,
        budget=effective,
        budget_event_source=str(budget.get("source", "")),
        utilisation=0.0,  # set once the request's overhead is known
        level=0,
        compacted=compaction is not None,
        removed=int(compaction["messages_removed"]) if compaction else 0,
        truncated=int(compaction["messages_truncated"]) if compaction else 0,
        stubbed=int(compaction["user_messages_stubbed"]) if compaction else 0,
        left_out=len(history) - (len(view) - int(notice) - repaired - sums.system_prompt_messages),
        shortened=sums.shortened,
        stubs=sums.stubs,
        repaired=repaired,
        notice=notice,
        valid=not violations,
        host_valid=None if host_problems is None else not host_problems,
        violations=violations,
        prefix_stable=True,
        request_budget=request_budget(budget),
        reserved_output=int(budget.get("reserved_output") or 0),
    )


def _share(tokens: int, limit: int) -> float:
    return round(tokens / limit, 4) if limit else 0.0


def _extends(
    previous: Sequence[Mapping[str, Any]] | None,
    view: Sequence[Mapping[str, Any]],
    shared: int,
) -> bool:
    """Whether the view begins with the whole of ``previous``, the last view as the provider
    saw it, notice included (the first view always does).

    ``shared`` is how many of that view's messages this one re-sends as the very same objects
    (``shared_start``).
    """
    if previous is None:
        return True
    if len(view) < len(previous):
        return False
    # A sticky view re-sends the very objects of the one before: nothing left to compare.
    if shared >= len(previous):
        return True
    return all(a is b or a == b for a, b in zip(previous, view, strict=False))


def _note_compaction(
    report: ReplayReport, record: RequestRecord, fresh: list[tuple[str, dict[str, Any]]]
) -> None:
    for name, data in fresh:
        if name != events.COMPACTION:
            continue
        report.compactions.append(
            CompactionRecord(
                request=record.request,
                at_message=record.at_message,
                level=int(data["strategy_level"]),
                before_tokens=int(data["before_tokens"]),
                after_tokens=int(data["after_tokens"]),
                before_messages=int(data["before_messages"]),
                after_messages=int(data["after_messages"]),
                removed=int(data["messages_removed"]),
                truncated=int(data["messages_truncated"]),
                stubbed=int(data["user_messages_stubbed"]),
                target_tokens=int(data["target_tokens"]),
                budget=int(data["budget"]),
                reason=data.get("reason"),
                at_turn_start=bool(data.get("at_turn_start")),
                thinking_blocks_after_edit=int(data.get("thinking_blocks_after_edit") or 0),
            )
        )
