"""The ``Budget`` record: what a request's budget is, its parts in words, and its event payload.

``_budget.derive_budget`` builds it (and re-exports it); the request path reads it.
"""

from __future__ import annotations

__all__ = ["Budget", "BudgetSource", "OutputSource"]

from dataclasses import dataclass
from typing import Any, Literal

BudgetSource = Literal[
    "explicit", "provider_model_info", "provider_defaults", "max_tokens_fallback"
]
OutputSource = Literal[
    "request", "model_defaults", "provider_defaults", "max_output_tokens", "assumed"
]
"""Where the output figure came from: the request's ``max_output_tokens``, the model's
``defaults["max_tokens"]``, ``get_info().defaults["max_tokens"]``, the model's max output, or
a share of the window when nothing was published."""

_PROVIDER_SOURCES: frozenset[str] = frozenset({"provider_model_info", "provider_defaults"})


@dataclass(frozen=True)
class Budget:
    """The budget a request runs on, with enough provenance to explain it."""

    source: BudgetSource
    context_window: int | None
    max_output_tokens: int | None
    reserved_output: int | None
    """The output tokens held back from the window (None without a provider window)."""
    derived_budget: int
    max_tokens: int | None
    max_tokens_fallback: int
    capped: bool
    effective_budget: int
    # Best-effort model identity for callers that tune by model family; not reported.
    model_name: str | None = None
    requested_output: int | None = None
    """What the provider will ask for as output (before ``output_reserve_fraction``)."""
    output_source: OutputSource | None = None
    margin: int = 0
    tool_definitions_tokens: int = 0
    learned_overhead_tokens: int = 0
    starved: bool = False
    """The output, margin, tools and learned overhead alone leave the view no room."""
    request_budget: int = 0
    """What the whole input of the request may take (the unit of a provider's count): the
    input room capped by ``max_tokens``, i.e. the budget plus what it held back for tool
    definitions and learned overhead (when those leave the view room); for an explicit
    budget, that budget plus the tools and the overhead the request carries besides it."""
    carried_tools: int = 0
    """The tool definitions the request carries, held back or not (an explicit budget is
    the view's and holds back none): what a reading is compared with, beside the view."""
    input_room: int = 0
    """What the whole input could hold before ``max_tokens`` caps it (the window less output
    and margin, the fallback, or an explicit budget plus what the request carries)."""

    def crowded(self, target_usage: float) -> bool:
        """The learned overhead alone leaves the view less than the target share of its room."""
        learned = self.learned_overhead_tokens
        return learned > 0 and self.effective_budget < target_usage * (
            self.effective_budget + learned
        )

    def parts_text(self) -> str:
        """The budget's arithmetic in words, for warnings and errors."""
        if self.context_window is None:
            text = f"the budget is {self.effective_budget:,} tokens ({self.source})"
        else:
            text = (
                f"the {self.context_window:,}-token window less {self.reserved_output or 0:,} "
                f"for the output the provider asks for, {self.margin:,} safety margin, "
                f"{self.tool_definitions_tokens:,} for tool definitions and "
                f"{self.learned_overhead_tokens:,} of learned overhead (injections, framing) "
                f"leaves {self.derived_budget:,} for the messages"
            )
        if self.capped:
            text += f", capped by max_tokens {self.max_tokens:,}"
        return text

    def payload(self) -> dict[str, Any]:
        """Return the JSON-safe ``context:budget`` event payload.

        The window fields only appear when a provider supplied them.
        """
        payload: dict[str, Any] = {"source": self.source}
        if self.source in _PROVIDER_SOURCES:
            payload["context_window"] = self.context_window
            payload["max_output_tokens"] = self.max_output_tokens
            payload["requested_output"] = self.requested_output
            payload["output_source"] = self.output_source
            payload["reserved_output"] = self.reserved_output
            payload["safety_margin"] = self.margin
        payload.update(
            tool_definitions_tokens=self.tool_definitions_tokens,
            tools_not_held_back=self.carried_tools - self.tool_definitions_tokens,
            learned_overhead_tokens=self.learned_overhead_tokens,
            derived_budget=self.derived_budget,
            max_tokens=self.max_tokens,
            max_tokens_fallback=self.max_tokens_fallback,
            capped=self.capped,
            effective_budget=self.effective_budget,
            request_budget=self.request_budget,
        )
        return payload
