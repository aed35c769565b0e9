"""The records a replay keeps: one per request and one per compaction.

Plain data, imported by the report that collects them and by the modules that judge them
(``refusals``), so neither has to import the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CompactionRecord", "RequestRecord"]


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
    budget_source: str
    utilisation: float
    """view_tokens / budget."""
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
    """The view without its notice begins with the previous view without its notice."""
    system_prompt_tokens: int = 0
    """Of ``view_tokens``, the system prompt the factory added (it is in no history message)."""
    overhead_tokens: int = 0
    """What the request carries besides the view (recorded system prompt, tool definitions)."""
    repairs: dict[str, int] = field(default_factory=dict[str, int])
    """The manager's ``view_repairs`` after this request, counted by kind (``REPAIR_KINDS``)."""

    @property
    def tokens_saved(self) -> int:
        """History tokens the view did not send (its added system prompt is not a saving)."""
        return self.history_tokens - (self.view_tokens - self.system_prompt_tokens)


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
