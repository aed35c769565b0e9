"""What one recorded provider request held, by category, against the window.

:func:`breakdown` reads one request's raw payload (Anthropic: ``system``, ``tools``,
``messages`` with ``text`` / ``thinking`` / ``tool_use`` / ``tool_result`` blocks; OpenAI chat:
system and developer messages inside ``messages``, ``tools`` with ``function``) beside the
Amplifier transcript the session had stored up to that request, and prices every part with the
module's estimator: system prompt, tool definitions (priced by the runtime's own
``estimate_tool_definitions``, the figure the live budget holds back), conversation messages,
ephemeral injections, the compaction notice, free space and the output reserve. The figures are the
estimator's over the payload; they are never scaled to the provider's total, which
:func:`compare` puts beside them. :func:`transcript_breakdown` is the same table for a bare
transcript, with the overhead the user states in place of the system prompt and tools.

The payload is matched to the transcript by :mod:`.payload_match`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import estimate_message_tokens
from ...sizing._tool_definitions import estimate_tool_definitions
from .payload_match import Alignment, Injection, MessageMatch, align, payload_parts
from .space_parts import Part, system_parts, tool_parts

__all__ = [
    "NOT_IN_LOG",
    "UsageComparison",
    "WindowBreakdown",
    "breakdown",
    "compare",
    "given_breakdown",
    "transcript_breakdown",
    "usage_figure",
]

Json = Mapping[str, Any]


@dataclass(frozen=True)
class WindowBreakdown:
    """One request's window by category, in estimator tokens (see the module docstring)."""

    context_window: int
    max_output: int
    family: str | None
    system: int
    tools: int
    conversation: int
    injections: tuple[Injection, ...]
    notice: int
    overhead: int | None = None
    """Tokens the user stated for what a bare transcript lacks (``--overhead``); None when the
    payload was recorded (then ``system`` and ``tools`` are measured)."""
    messages: tuple[MessageMatch, ...] = field(default=(), repr=False)
    tool_parts: tuple[Part, ...] = ()
    """Each tool definition with its own estimate, largest first (a recorded payload only)."""
    system_parts: tuple[Part, ...] = ()
    """The system prompt's recorded parts, largest first (a recorded payload only)."""
    unlogged: int = 0
    """What the provider counted beyond what a log holds (its system prompt, the agent's
    tools): the recorded figure less ours, for a log with usage and no payload. It takes room
    in the window, so it is never counted as free."""

    @property
    def injected(self) -> int:
        return sum(i.tokens for i in self.injections)

    @property
    def estimated(self) -> int:
        """What the request held by the module's estimate (``used`` less ``unlogged``)."""
        given = self.overhead or 0
        return self.system + self.tools + given + self.conversation + self.injected + self.notice

    @property
    def used(self) -> int:
        return self.estimated + self.unlogged

    @property
    def free(self) -> int:
        return max(0, self.context_window - self.used - self.max_output)

    @property
    def over(self) -> int:
        """How far the prompt plus the output reserve exceeds the window (0: it fits)."""
        return max(0, self.used + self.max_output - self.context_window)

    def categories(self) -> list[tuple[str, int]]:
        """(label, tokens) in display order; ``used + free + reserve - over == window``."""
        head = (
            [("system prompt", self.system), ("tool definitions", self.tools)]
            if self.overhead is None
            else [("overhead (given)", self.overhead)]
        )
        if self.unlogged:
            head.append((NOT_IN_LOG, self.unlogged))
        return [
            *head,
            ("conversation messages", self.conversation),
            ("ephemeral injections", self.injected),
            ("compaction notice", self.notice),
            ("free space", self.free),
            ("kept back for output", self.max_output),
        ]


NOT_IN_LOG = "not in the log: system prompt, tools"
"""The category of what the provider counted that the log does not hold."""


@dataclass(frozen=True)
class UsageComparison:
    """Our total beside the provider's occupancy (``input_tokens`` + ``cache_write_tokens``)."""

    ours: int
    provider: int

    @property
    def gap(self) -> int:
        return self.ours - self.provider

    @property
    def gap_share(self) -> float | None:
        return self.gap / self.provider if self.provider else None


def usage_figure(usage: Any, key: str) -> int | None:
    """One figure of a usage record: a mapping (the event's ``usage``) or an object with the
    attribute (a parsed usage record); None when absent or not an integer."""
    if usage is None:
        return None
    value = usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compare(window: WindowBreakdown, usage: Any) -> UsageComparison | None:
    """Ours beside the provider's; None when ``usage`` has no input figure.

    ``usage`` is Amplifier's ``llm:response`` usage (a mapping, or a record with the same
    attributes), whose ``input_tokens`` is gross (it already includes the cache reads); the
    cache writes are added because they were prompt tokens too.
    """
    gross = usage_figure(usage, "input_tokens")
    if gross is None:
        return None
    written = usage_figure(usage, "cache_write_tokens") or 0
    return UsageComparison(window.estimated, gross + written)


def breakdown(
    payload: Json,
    transcript: Sequence[Json],
    *,
    family: str | None,
    context_window: int,
    max_output: int,
    notice_tokens: int = 0,
    aligned: Alignment | None = None,
) -> WindowBreakdown:
    """One recorded request by category; ``notice_tokens`` counts when the payload has none;
    ``aligned``: the payload already aligned with ``transcript`` (else aligned here)."""
    system, tools, _ = payload_parts(payload)
    if aligned is None:
        aligned = align(payload, transcript, family=family)
    return WindowBreakdown(
        context_window=context_window,
        max_output=max_output,
        family=family,
        system=_system_tokens(system, family),
        tools=estimate_tool_definitions(tools, family),
        conversation=sum(m.tokens for m in aligned.messages),
        injections=aligned.injections,
        notice=aligned.notice_tokens or notice_tokens,
        messages=aligned.messages,
        tool_parts=tool_parts(tools, family),
        system_parts=system_parts(system, family),
    )


def transcript_breakdown(
    messages: Sequence[Json],
    *,
    overhead: int,
    family: str | None,
    context_window: int,
    max_output: int,
    notice_tokens: int = 0,
) -> WindowBreakdown:
    """A bare transcript's (or view's) window: the stated ``overhead`` instead of system/tools."""
    return given_breakdown(
        conversation=sum(estimate_message_tokens(m, family=family) for m in messages),
        overhead=overhead,
        family=family,
        context_window=context_window,
        max_output=max_output,
        notice_tokens=notice_tokens,
    )


def given_breakdown(
    *,
    conversation: int,
    overhead: int,
    family: str | None,
    context_window: int,
    max_output: int,
    notice_tokens: int = 0,
) -> WindowBreakdown:
    """The window of a view whose ``conversation`` tokens are already summed (no payload)."""
    return WindowBreakdown(
        context_window=context_window,
        max_output=max_output,
        family=family,
        system=0,
        tools=0,
        conversation=conversation,
        injections=(),
        notice=notice_tokens,
        overhead=overhead,
    )


def _system_tokens(system: list[Any], family: str | None) -> int:
    if not system:
        return 0
    if all(isinstance(s, Mapping) and "role" in s for s in system):
        return sum(estimate_message_tokens(s, family=family) for s in system)
    return estimate_message_tokens({"role": "system", "content": system}, family=family)
