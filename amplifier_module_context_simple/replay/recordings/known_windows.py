"""Known context windows by model name: the fallback when nothing else names the window.

A replay takes the window from, in order: ``--context-window``; a recorded ``context:budget``
event (the window the context module was actually given); and only then this table, looked up
by the session's model and its provider config. So the table is a fallback, used only when the
session records no ``context:budget`` event and no ``--context-window`` flag is given; for a
bare transcript or a log, the model ``--model`` (or the log) names. An unknown model gets no
window (the budget is then ``max_tokens_fallback``), never a guess, and a warning names it.

A name matches the longest ``model_prefix`` it starts with (a dated name such as
``claude-sonnet-4-5-20250929`` matches ``claude-sonnet-4-5``; a ``provider/`` prefix is
ignored). A row with ``needs`` applies only when that provider-config flag is on: Anthropic's
1M-token window is opt-in, and the Anthropic provider module turns it on with
``enable_1m_context``, which app settings record as the string ``"true"``; a bool or the strings
``"true"``/``"false"`` (any case) are accepted.

Max output: the replay prefers the recorded request's ``max_tokens`` (128,000 in the shared
opus session) over this table's figure. It is what the session really asked the provider for,
so it is what the provider held back from the window on every request; the table's figure is
only the model's ceiling, which an orchestrator may ask for less of. The table's figure is used
when no request was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KNOWN_WINDOWS", "KnownWindow", "is_on", "known_window"]


@dataclass(frozen=True)
class KnownWindow:
    """A model family's context window and output ceiling, as its vendor documents them."""

    model_prefix: str
    context_window: int
    max_output_tokens: int
    needs: str | None = None
    """A provider-config flag that must be on for this row (``None``: always applies)."""


_ONE_M = "enable_1m_context"

KNOWN_WINDOWS: tuple[KnownWindow, ...] = (
    # Anthropic, "Models overview" (docs.anthropic.com/en/docs/about-claude/models/overview):
    # context window and max output per model. The 1M-token rows: "Context windows", 1M token
    # context window (docs.anthropic.com/en/docs/build-with-claude/context-windows), opt-in per
    # request, which provider-anthropic sends when its enable_1m_context is on.
    # Opus 4.6 and later: 200K (1M opt-in), 128K max output (the recorded opus-4-8 session
    # asks for max_tokens 128,000, which agrees). Cross-checked, 2026-12-01, against the table
    # litellm 1.110.2 ships (model_prices_and_context_window.json, on PyPI): 1,000,000 input
    # and 128,000 output for opus-4-6, 4-7, 4-8 and sonnet-4-6; 200,000 and 64,000 for
    # opus-4-5, sonnet-4-5 and haiku-4-5. It does not say which windows are opt-in.
    KnownWindow("claude-opus-4-8", 200_000, 128_000),
    KnownWindow("claude-opus-4-8", 1_000_000, 128_000, needs=_ONE_M),
    KnownWindow("claude-opus-4-7", 200_000, 128_000),
    KnownWindow("claude-opus-4-7", 1_000_000, 128_000, needs=_ONE_M),
    KnownWindow("claude-opus-4-6", 200_000, 128_000),
    KnownWindow("claude-opus-4-6", 1_000_000, 128_000, needs=_ONE_M),
    # Opus 4.5: 200K, 64K out; Opus 4 and 4.1: 200K, 32K out.
    KnownWindow("claude-opus-4-5", 200_000, 64_000),
    KnownWindow("claude-opus-4", 200_000, 32_000),
    # Sonnet 4.6: 200K (1M opt-in, as for Opus 4.6), 128K out.
    KnownWindow("claude-sonnet-4-6", 200_000, 128_000),
    KnownWindow("claude-sonnet-4-6", 1_000_000, 128_000, needs=_ONE_M),
    # Sonnet 4 and 4.5: 200K (1M opt-in), 64K out.
    KnownWindow("claude-sonnet-4", 200_000, 64_000),
    KnownWindow("claude-sonnet-4", 1_000_000, 64_000, needs=_ONE_M),
    # Haiku 4.5: 200K, 64K out.
    KnownWindow("claude-haiku-4", 200_000, 64_000),
    # OpenAI model pages (platform.openai.com/docs/models/<model>): context window and max
    # output tokens. GPT-4o and GPT-4o mini: 128,000 / 16,384.
    KnownWindow("gpt-4o", 128_000, 16_384),
    # GPT-4.1 (and mini, nano): 1,047,576 / 32,768.
    KnownWindow("gpt-4.1", 1_047_576, 32_768),
    # GPT-5 (and mini, nano): 400,000 / 128,000, of which at most 272,000 input (litellm:
    # max_input_tokens 272,000). The budget this row gives (the window less half the output)
    # is above that input ceiling; a replay flags the views past it as refused.
    KnownWindow("gpt-5", 400_000, 128_000),
)


def is_on(value: object) -> bool:
    """A config flag as settings files record it: ``True``, or the string ``"true"``."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() == "true"


def known_window(
    model: str | None, provider_config: Mapping[str, Any] | None = None
) -> KnownWindow | None:
    """The row for ``model`` under ``provider_config``, or ``None`` for an unknown model.

    Of the rows whose prefix the name starts with, the longest prefix wins; between two rows
    of one prefix, the one whose ``needs`` flag is on (the larger, opt-in window).
    """
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    config = provider_config or {}
    usable = [
        w
        for w in KNOWN_WINDOWS
        if name.startswith(w.model_prefix) and (w.needs is None or is_on(config.get(w.needs)))
    ]
    if not usable:
        return None
    return max(usable, key=lambda w: (len(w.model_prefix), w.needs is not None))
