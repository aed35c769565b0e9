"""The records a replay keeps: one per request and one per compaction.

Plain data, imported by the report that collects them and by the modules that judge them
(``refusals``), so neither has to import the other; and :func:`request_budget`, the limit a
request is judged against, read off the ``context:budget`` payload in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...views._ladder import FIT_LEVEL, RUNGS, Rung

__all__ = [
    "CompactionRecord",
    "RequestRecord",
    "levels_text",
    "not_recorded_check_text",
    "not_recorded_text",
    "numbers_text",
    "request_budget",
]


def levels_text(rungs: tuple[Rung, ...] = RUNGS) -> str:
    """One line on what each compaction level (a rung of the ladder) does, from the rungs."""

    def of(action: str) -> list[Rung]:
        return [r for r in rungs if r.action == action]

    def levels(found: list[Rung]) -> str:
        return ", ".join(str(r.level) for r in found)

    truncate, remove, extreme = of("truncate"), of("remove"), of("extreme")
    parts = [
        f"{levels(truncate)} shorten the oldest "
        + ", ".join("all" if r.share >= 1 else f"{r.share:.0%}" for r in truncate)
        + " of the unprotected tool results",
        f"{levels(remove)} leave out old turns older than the protected recent share of the "
        f"messages (protected_recent x {', '.join(f'{r.share:g}' for r in remove)})",
    ]
    parts += [
        f"{r.level} removes old stubs and stubs the oldest long user message that is no prompt"
        for r in extreme
    ]
    return (
        "Levels: the ladder's rungs, tried in order while the view is over the target: "
        + "; ".join(parts)
        + f"; still over the budget, a fit pass relaxes protection (reported as level "
        f"{FIT_LEVEL}). A request's level is the deepest reached so far."
    )


def numbers_text(numbers: list[int]) -> str:
    """Request numbers as runs: ``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _requests(numbers: list[int]) -> str:
    return ("requests " if len(numbers) > 1 else "request ") + numbers_text(numbers)


def _were(numbers: list[int]) -> str:
    return "were" if len(numbers) > 1 else "was"


def not_recorded_text(
    not_recorded: list[int], requests: int, *, recorded_any: bool = True
) -> str | None:
    """The partial-session line of the report (``None``: every request was recorded).

    ``recorded_any``: the events file has at least one request (else it may be a hook that
    logs none, not a session cut short, and the line says only what is missing).
    """
    if not not_recorded:
        return None
    if not recorded_any:
        return (
            f"No request payload recorded: the events file has no llm:request event, so the "
            f"{requests:,} requests are the replayed views alone, their injections and the "
            "provider's usage unknown"
        )
    which = f"{_requests(not_recorded)} of {requests:,} {_were(not_recorded)} not recorded"
    return (
        f"Partial session: {which} (the events file ends before them: a crashed or "
        "still-running session); their figures are the replayed view with the last recorded "
        "request's tool definitions, their injections and the provider's usage unknown"
    )


def not_recorded_check_text(not_recorded: list[int], requests: int) -> str | None:
    """What ``--check`` could not judge (``None``: it judged every request whole)."""
    if not not_recorded:
        return None
    return (
        f"{_requests(not_recorded)} of {requests:,} {_were(not_recorded)} not recorded: their "
        "views are judged valid or not in full, their size only on what is known (the replayed "
        "view and the last recorded tool definitions, if any; injections unknown), so 'above "
        "the window' is a lower bound for them"
    )


def request_budget(budget: Mapping[str, Any]) -> int:
    """What the whole request's input may take under ``budget`` (a ``context:budget`` payload).

    The runtime reports it (``request_budget``: ``min(window - output held back - margin,
    max_tokens)``). A payload recorded by an earlier version has no such key: its budget was
    the whole of it, so the effective budget stands in.
    """
    reported = budget.get("request_budget")
    if isinstance(reported, int) and not isinstance(reported, bool):
        return reported
    return int(budget.get("effective_budget") or 0)


@dataclass
class RequestRecord:
    """One request: what the history held and what the view sent."""

    request: int
    """1-based request number."""
    at_message: int
    """0-based position (in the replayed messages) of the assistant message that followed."""
    history_messages: int
    history_tokens: int
    view_messages: int
    view_tokens: int
    budget: int
    """The view's budget (``effective_budget``): what compaction works against."""
    budget_event_source: str
    """The module's own ``source`` on its ``context:budget`` event: which provider figure gave
    it the window. A replay's simulated provider publishes its window in ``get_info()``'s
    defaults, so a replay says ``provider_defaults`` whatever the window's origin; where the
    figures came from is ``source.settings`` (the Settings table)."""
    utilisation: float
    """``request_tokens / request_budget``: the whole request against its budget."""
    level: int
    compacted: bool
    """An escalation happened at this request (the figures below are what it added)."""
    removed: int
    truncated: int
    stubbed: int
    left_out: int
    """History messages not in the view, in total (sticky decisions included)."""
    shortened: int
    """Truncated tool results in the view, in total."""
    stubs: int
    repaired: int
    """Placeholder results for calls that never got one."""
    notice: bool
    valid: bool
    """No ``check_view`` violation, and the host model accepts the view (when it was run)."""
    host_valid: bool | None
    """The host's ``Message`` / ``ChatRequest`` models accept the view; ``None``: not run."""
    violations: list[str]
    """``check_view``'s violations, then the host model's objections."""
    prefix_stable: bool
    """The view begins with the whole previous view as the provider saw it, notice included
    (what a provider's prompt cache can reuse)."""
    system_prompt_tokens: int = 0
    """Of ``view_tokens``, the system prompt the factory added (it is in no history message)."""
    added_tokens: int = 0
    """Of ``view_tokens``, what else the view added that is no history message: placeholder
    results for interrupted calls and the compaction notice (counted apart from what was
    not sent)."""
    overhead_tokens: int = 0
    """What the request carries besides the view: a recorded payload's tool definitions and
    ephemeral injections (the view has its system prompt), or a bare transcript's
    ``--overhead`` (``session_analysis``)."""
    request_budget: int = 0
    """What the whole request's input may take (:func:`request_budget` of the budget in
    force): the limit ``request_tokens`` is held to."""
    reserved_output: int = 0
    """The output the budget in force held back from the window (0 without a window)."""
    simulated_priced_input_tokens: float = 0.0
    """Its input priced through the simulated cache (``replay_cache``), base-price tokens."""
    repairs: dict[str, int] = field(default_factory=dict[str, int])
    """The manager's ``view_repairs`` after this request, counted by kind (``REPAIR_KINDS``)."""

    @property
    def request_tokens(self) -> int:
        """The whole request's input, as the provider counts it: the view (system prompt,
        messages, notice) plus its overhead (tools, injections). The one figure the summary's
        budget rows and ``refusals`` both judge."""
        return self.view_tokens + self.overhead_tokens

    @property
    def over_budget(self) -> bool:
        """The whole request is over the request budget."""
        return self.request_tokens > self.request_budget

    @property
    def tokens_saved(self) -> int:
        """History tokens the view did not send: what it sent of the history is the view less
        what it added (system prompt, placeholders, notice), so it is never negative."""
        sent = self.view_tokens - self.system_prompt_tokens - self.added_tokens
        return max(0, self.history_tokens - sent)


@dataclass
class CompactionRecord:
    """One escalation, from its ``context:compaction`` event."""

    request: int
    at_message: int
    level: int
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    removed: int
    truncated: int
    stubbed: int
    target_tokens: int
    budget: int
    """The usable budget the ladder worked against (the budget less the notice reserve)."""
    reason: str | None = None
    """Why it escalated (the event's ``reason``: threshold, over_budget, turn_start,
    cold_cache)."""
    at_turn_start: bool = False
    """At a turn's first request (else inside a tool loop or after a reminder)."""
    thinking_blocks_after_edit: int = 0
    """Thinking blocks after the edit: what a model whose thinking is bound to its prompt
    loses with it."""
