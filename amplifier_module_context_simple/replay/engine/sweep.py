"""Comparing settings in one run: the same messages replayed once per setting.

The swept keys (:data:`SWEPT_KEYS`: ``compact_threshold``, ``target_usage``, ``max_tokens``,
``compaction_notice_token_reserve``) each take a comma list; every combination of them (the
cross product, at most :data:`MAX_ROWS`) is one replay whose config is the prepared one with the
swept keys replaced (``dataclasses.replace``). Each row says what that setting did:
compactions, prefix breaks (views whose prefix is not the previous view's), the peak share of the
window (view plus overhead over the context window, or over the budget when no window is known:
``share_of`` says which), the views a provider would refuse (``refusals``), what the session's
input costs through the simulated provider cache (``replay_cache``: base-price tokens, every
message cached and cached only at the provider's markers) and what the views kept (the share of
the history's tokens each view sent, mean and smallest) and the evidence it kept (of what the
agent's next calls used, the share its views still showed: ``evidence``). The table ranks the
rows by cost.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ... import ContextConfig
from ..findings.refusals import assess
from ..provider.simulation import Window
from .engine import replay
from .report import ReplayReport

__all__ = [
    "MAX_ROWS",
    "SHARE_OF_BUDGET",
    "SHARE_OF_WINDOW",
    "SWEPT_KEYS",
    "SweepRow",
    "as_json",
    "parse_values",
    "row_for",
    "settings",
    "sweep",
]

MAX_ROWS = 64
"""The most settings one sweep replays (each is a whole replay)."""
SWEPT_KEYS: dict[str, tuple[str, type]] = {
    "compact_threshold": ("--compact-threshold", float),
    "target_usage": ("--target-usage", float),
    "max_tokens": ("--max-tokens", int),
    "compaction_notice_token_reserve": ("--notice-reserve", int),
}
"""Config key -> (its flag, the type of each listed value)."""
SHARE_OF_WINDOW = "window"
SHARE_OF_BUDGET = "budget"


@dataclass(frozen=True)
class SweepRow:
    """What one setting did over the whole replay."""

    setting: dict[str, Any]
    """The swept keys and their values for this row."""
    requests: int
    compactions: int
    prefix_breaks: int
    """Views whose prefix is not the previous view's (``prefix_stable`` false)."""
    peak_tokens: int
    """The largest view plus its overhead."""
    peak_share: float
    share_of: str
    """``SHARE_OF_WINDOW`` (the context window), or ``SHARE_OF_BUDGET`` when none is known."""
    budget: int
    refused_views: int
    invalid_views: int
    priced_input_tokens: float = 0.0
    """The session's input through the simulated cache, every message boundary cached."""
    priced_at_markers: float = 0.0
    """The same, cached only at the head and each request's end (the provider's markers)."""
    kept_mean: float = 1.0
    """Mean over the views of the share of the history's tokens the view sent."""
    kept_min: float = 1.0
    evidence_kept: float | None = None
    """Of the strings the recorded next messages' calls used that the history held, the share
    the views still showed (*in context*, ``evidence``); ``None``: the calls used none."""
    evidence_findable: float | None = None
    """The share the views showed or named in their map of what was left out (*findable*)."""


def parse_values(key: str, text: str) -> list[Any]:
    """The comma list given for ``key``; ``ValueError`` naming the flag for a bad item."""
    flag, kind = SWEPT_KEYS[key]
    values: list[Any] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            value = kind(item)
        except ValueError:
            raise ValueError(
                f"{flag}: {item!r} is not {'an integer' if kind is int else 'a number'}"
                " (give a comma list, e.g. 0.6,0.8)"
            ) from None
        if kind is int and value <= 0:
            raise ValueError(f"{flag} must be positive integers; got {item}")
        try:
            ContextConfig.from_mapping({key: value})
        except ValueError as exc:
            raise ValueError(f"{flag}: {exc}") from None
        if value not in values:
            values.append(value)
    return values


def settings(lists: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the listed values, in the order given (``[{}]``: none swept)."""
    keys = [k for k in SWEPT_KEYS if lists.get(k)]
    count = 1
    for key in keys:
        count *= len(lists[key])
    if count > MAX_ROWS:
        shown = " x ".join(f"{len(lists[k])} {SWEPT_KEYS[k][0]}" for k in keys)
        raise ValueError(
            f"the sweep would replay {count} settings ({shown}); the most is {MAX_ROWS}: "
            "give fewer values"
        )
    combos = itertools.product(*(lists[k] for k in keys))
    return [dict(zip(keys, combo, strict=True)) for combo in combos]


def row_for(setting: Mapping[str, Any], report: ReplayReport) -> SweepRow:
    """One row from the replay of one setting."""
    summary = report.summary()
    window = report.window
    peak = max((r.request_tokens for r in report.requests), default=0)
    cost, kept = report.simulated_cost, _kept(report)
    of = window.context_window if window is not None else summary["budget"]
    return SweepRow(
        setting=dict(setting),
        requests=len(report.requests),
        compactions=len(report.compactions),
        prefix_breaks=sum(not r.prefix_stable for r in report.requests),
        peak_tokens=peak,
        peak_share=round(peak / of, 4) if of else 0.0,
        share_of=SHARE_OF_WINDOW if window is not None else SHARE_OF_BUDGET,
        budget=int(summary["budget"]),
        refused_views=assess(report).refused_views,
        invalid_views=int(summary["invalid_views"]),
        priced_input_tokens=0.0 if cost is None else round(cost.priced_input_tokens, 1),
        priced_at_markers=0.0 if cost is None else round(cost.priced_at_markers, 1),
        kept_mean=round(sum(kept) / len(kept), 4) if kept else 1.0,
        kept_min=round(min(kept), 4) if kept else 1.0,
        evidence_kept=summary["evidence_kept_share"],
        evidence_findable=summary["evidence_findable_share"],
    )


def _kept(report: ReplayReport) -> list[float]:
    """Per view, the share of the history's tokens it sent (its added system prompt aside)."""
    return [
        min(1.0, max(0, r.view_tokens - r.system_prompt_tokens) / r.history_tokens)
        for r in report.requests
        if r.history_tokens
    ]


async def sweep(
    messages: Sequence[Mapping[str, Any]],
    *,
    config: ContextConfig,
    window: Window | None,
    rows: Sequence[Mapping[str, Any]],
    source: dict[str, Any] | None = None,
    overhead: int | None = None,
) -> list[SweepRow]:
    """Replay ``messages`` once per setting in ``rows`` (swept key -> value)."""
    found: list[SweepRow] = []
    for setting in rows:
        outcome = await replay(
            messages,
            config=replace(config, **setting),
            window=window,
            source=source,
            overhead=overhead,
        )
        found.append(row_for(setting, outcome.report))
    return found


def as_json(rows: Sequence[SweepRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
