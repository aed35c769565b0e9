"""What a replay found: one record per request and per compaction, and the report of them.

Token figures are the module's own estimates (the same estimator and tokenizer family the
manager uses for its decisions), not provider counts. ``ReplayReport.as_json()`` is the
``--json`` document.

The summary's budget figures judge the whole request (``RequestRecord.request_tokens``: the
view with its system prompt, plus the tool definitions and injections a recorded payload
carried or the ``--overhead`` given) against the request budget (``request_budget``: the
window less the output held back and the margin, capped by ``max_tokens``), as ``--check``
(``refusals``) judges the same whole request plus the requested output against the window:

* ``final_level``: the level of the last compaction (0: none), ``deepest_level`` the highest
  any reached (each request's ``level`` is the deepest reached up to it: the decisions in
  force carry it);
* ``tokens_saved``: each request's history tokens less its view's (the view's added system
  prompt not counted: it is no history message), summed over the requests
  (what re-sending the whole history every time would have added); ``final_tokens_saved``
  the last request's;
* ``max_utilisation`` / ``mean_utilisation``: ``request_tokens / request_budget`` over the
  requests (each request's ``utilisation``); before the budget was the request's, they were
  the view over the view's budget;
* ``over_budget_requests``: requests whose whole request is over the request budget;
* ``peak_request_tokens``: the largest whole request (``peak_view_tokens``: the largest view);
* ``budget``: the view's budget at the last request (what compaction works against: the
  request budget less the tool definitions and the learned overhead), ``request_budget`` the
  request budget then; ``budget_capped`` is the same budget event's, and ``budget_source`` is
  where the budget came from as the Settings table says (``session events``, ``model table``,
  ``flag`` or ``default``: the source of ``max_tokens`` when it capped the budget, else of the
  window);
* ``refused_within_budget``: requests ``--check`` refuses above the window that the budget
  allowed (only where the provider reserves more output than the budget held back).

A recorded session's summary also carries ``priced_input_tokens`` (its recorded input in
base-price token equivalents), ``input_usd`` (None where the model's price is unknown) and
``break_cost_share`` (the share of that cost its cache breaks caused); ``cache.requests``
prices each request the same way.

Each request carries ``request_tokens``, ``request_budget``, ``reserved_output`` and
``over_budget``; ``budget`` is the last ``context:budget`` payload and ``initial_budget`` the
first (before any reading taught the budget an overhead).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from operator import attrgetter
from typing import Any

from ... import ContextConfig
from ..findings.drops import Drop
from ..findings.evidence import EvidenceRecord, by_compaction, findable_share, kept_share
from ..findings.records import CompactionRecord, RequestRecord
from ..findings.refusals import assess
from ..findings.rework import Rework
from ..provider.cache_reuse import CacheReport
from ..provider.replay_cache import SimulatedCost
from ..provider.simulation import Window
from .host_check import HOST_CHECK_RUN
from .session_analysis import WindowEntry, cache_json

__all__ = ["SCHEMA_VERSION", "CompactionRecord", "ReplayReport", "RequestRecord"]

SCHEMA_VERSION = 1
"""The version of the ``--json`` documents' layout (``docs/replay-json.md``): raised when a key
is removed, renamed or changes meaning; added keys leave it as it is."""


@dataclass
class ReplayReport:
    """Everything a replay found; ``as_json()`` is the ``--json`` document."""

    source: dict[str, Any]
    config: ContextConfig
    window: Window | None
    token_family: str | None = None
    requests: list[RequestRecord] = field(default_factory=list[RequestRecord])
    compactions: list[CompactionRecord] = field(default_factory=list[CompactionRecord])
    budget_event: dict[str, Any] | None = None
    initial_budget_event: dict[str, Any] | None = None
    """The first budget of the replay (before any reading taught it an overhead): the Budget
    line and the settings table name it beside the last one when the two differ."""
    ingress_truncations: int = 0
    warnings: dict[str, int] = field(default_factory=dict[str, int])
    history_messages: int = 0
    history_tokens: int = 0
    host_check: str = HOST_CHECK_RUN
    """``HOST_CHECK_RUN``, or ``HOST_CHECK_NOT_RUN`` when amplifier-core is not installed."""
    drops: list[Drop] = field(default_factory=list[Drop])
    """Every message a view left out, shortened, stubbed or restored, in request order."""
    repairs: dict[str, int] = field(default_factory=dict[str, int])
    """Distinct ``view_repairs`` entries over the replay, counted by kind."""
    windows: list[WindowEntry] = field(default_factory=list[WindowEntry])
    """What each request's window held, by category (``session_analysis``)."""
    window_basis: str = ""
    """What the categories were measured on: ``session_analysis.BASIS_*``."""
    cache: CacheReport | None = None
    """The provider's cache over the recorded requests; ``None``: none was recorded."""
    not_recorded: list[int] = field(default_factory=list[int])
    """Requests of a recorded session with no recorded payload (its events file ends before
    them: a crashed or still-running session); always empty for a bare transcript."""
    simulated_cost: SimulatedCost | None = None
    """The replayed views priced through a simulated provider cache (``replay_cache``)."""
    recorded_session: bool = False
    """The replay was fed a session's recorded requests (a session directory with events)."""
    evidence: list[EvidenceRecord] = field(default_factory=list[EvidenceRecord])
    """Per request, what the recorded next message used and the view still showed
    (``evidence``)."""
    rework: Rework | None = None
    """Calls repeated after the session's own compactions (``rework``); ``None``: the source
    recorded no compaction of its own."""

    def summary(self) -> dict[str, Any]:
        requests = self.requests
        utilisation = [r.utilisation for r in requests]
        budget = self.budget_event or {}
        effective = int(budget.get("effective_budget", 0))
        refusals = assess(self)
        return {
            "messages": self.history_messages,
            "history_tokens": self.history_tokens,
            "requests": len(requests),
            "compactions": len(self.compactions),
            "final_level": self.compactions[-1].level if self.compactions else 0,
            "deepest_level": max((c.level for c in self.compactions), default=0),
            "max_utilisation": round(max(utilisation, default=0.0), 4),
            "mean_utilisation": round(sum(utilisation) / len(utilisation), 4)
            if utilisation
            else 0.0,
            "peak_view_tokens": max((r.view_tokens for r in requests), default=0),
            "peak_request_tokens": max((r.request_tokens for r in requests), default=0),
            "tokens_saved": sum(r.tokens_saved for r in requests),
            "final_tokens_saved": requests[-1].tokens_saved if requests else 0,
            "prefix_stable_requests": sum(r.prefix_stable for r in requests),
            "invalid_views": sum(not r.valid for r in requests),
            "host_check": self.host_check,
            "host_invalid_views": sum(r.host_valid is False for r in requests),
            "over_budget_requests": sum(r.over_budget for r in requests),
            "ingress_truncations": self.ingress_truncations,
            "budget": effective,
            "request_budget": requests[-1].request_budget if requests else 0,
            "budget_source": self._budget_setting_source(),
            "budget_capped": bool(budget.get("capped", False)),
            "trigger_tokens": int(self.config.trigger(effective)),
            "refused_views": refusals.refused_views,
            "refused_within_budget": refusals.within_budget,
            "dropped_messages": len({d.position for d in self.drops}),
            "evidence_used": sum(e.used for e in self.evidence),
            "evidence_kept": sum(e.kept for e in self.evidence),
            "evidence_kept_share": kept_share(self.evidence),
            "evidence_findable": sum(e.findable for e in self.evidence),
            "evidence_findable_share": findable_share(self.evidence),
            "not_recorded_requests": list(self.not_recorded) if self.recorded_session else None,
            **self._cache_summary(),
            "simulated_cache": None
            if self.simulated_cost is None
            else self.simulated_cost.as_json(),
        }

    def _budget_setting_source(self) -> str | None:
        """Where the budget came from, as the Settings table says (one answer for both)."""
        settings: list[dict[str, Any]] = self.source.get("settings") or []
        return next((s.get("source") for s in settings if s.get("name") == "budget"), None)

    def _cache_summary(self) -> dict[str, Any]:
        cache = self.cache
        if cache is None:
            return {}
        share = cache.share
        priced = cache.priced_input_tokens
        dollars = cache.input_dollars
        breaks = cache.break_cost()
        caused = None if breaks is None else breaks.caused_share
        return {
            "cache_read_share": None if share is None else round(share, 4),
            "cache_breaks": cache.breaks,
            "cache_break_causes": cache.causes(),
            "priced_input_tokens": None if priced is None else round(priced, 1),
            "input_usd": None if dollars is None else round(dollars, 6),
            "break_cost_share": None if caused is None else round(caused, 4),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "config": asdict(self.config),
            "window": asdict(self.window) if self.window else None,
            "token_family": self.token_family,
            "budget": self.budget_event,
            "initial_budget": self.initial_budget_event,
            "summary": self.summary(),
            "compactions": _records(self.compactions),
            "requests": [
                {**row, "request_tokens": r.request_tokens, "over_budget": r.over_budget}
                for row, r in zip(_records(self.requests), self.requests, strict=True)
            ],
            "warnings": [{"message": m, "count": n} for m, n in self.warnings.items()],
            "refusals": assess(self).as_json(),
            "drops": _records(self.drops),
            "evidence": _records(self.evidence),
            "evidence_by_compaction": _records(
                by_compaction(self.evidence, [c.request for c in self.compactions])
            ),
            "rework": None if self.rework is None else self.rework.as_json(),
            "window_basis": self.window_basis,
            "window_by_category": [w.as_json() for w in self.windows],
            "cache": None if self.cache is None else cache_json(self.cache),
        }


def _copied(value: Any) -> Any:
    if isinstance(value, list) and value and is_dataclass(value[0]):
        return [asdict(item) for item in value]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    return value.copy() if isinstance(value, list | dict) else value


def _records(records: list[Any]) -> list[dict[str, Any]]:
    """``[asdict(r) for r in records]`` for records of one flat dataclass, without its cost.

    The records' fields hold scalars, lists of strings or dicts of scalars, so a shallow copy
    of each list and dict is what ``asdict``'s deep copy gives; a list of records (the
    evidence's map findings) is converted record by record.
    """
    if not records:
        return []
    kind = type(records[0])
    names = tuple(f.name for f in fields(kind))
    values = attrgetter(*names)
    return [
        {name: _copied(value) for name, value in zip(names, values(record), strict=True)}
        if type(record) is kind and len(names) > 1
        else asdict(record)
        for record in records
    ]
