"""The simulated provider window a replay derives its budget from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "EXAMPLE_WINDOW",
    "SimulatedProvider",
    "Window",
    "build_window",
]

DEFAULT_MAX_OUTPUT = 16_384
"""Max output tokens assumed when a window is simulated and no figure is known (neither
``--max-output-tokens`` nor a session's own): the built-in example's too (``EXAMPLE_WINDOW``),
so the help's one default is true of both. OpenAI's published default for GPT-4o-sized models."""


@dataclass(frozen=True)
class Window:
    """A simulated provider window."""

    context_window: int
    max_output_tokens: int
    model: str | None = None


@dataclass(frozen=True)
class _ProviderInfo:
    model: str | None
    defaults: dict[str, Any]


class SimulatedProvider:
    """The smallest provider ``derive_budget`` reads: ``get_info().defaults`` with a window."""

    def __init__(self, window: Window) -> None:
        self.window = window

    def get_info(self) -> _ProviderInfo:
        defaults: dict[str, Any] = {
            "context_window": self.window.context_window,
            "max_output_tokens": self.window.max_output_tokens,
        }
        if self.window.model:
            defaults["model"] = self.window.model
        return _ProviderInfo(model=self.window.model, defaults=defaults)


EXAMPLE_WINDOW = Window(context_window=128_000, max_output_tokens=DEFAULT_MAX_OUTPUT)
"""The window simulated for the built-in example (a GPT-4o-sized model), so compaction shows."""


def build_window(
    context_window: int | None, max_output: int | None, model: str | None
) -> Window | None:
    """The simulated window, or ``None``; ``ValueError`` for a figure that is not positive.

    Any positive window gets a budget inside it (the budget's own rule), so a window smaller
    than the output is replayed, and ``--check`` says which requests it would refuse.
    """
    if context_window is None:
        if max_output is not None:
            raise ValueError("--max-output-tokens needs --context-window")
        return None
    max_output = DEFAULT_MAX_OUTPUT if max_output is None else max_output
    if context_window <= 0 or max_output <= 0:
        raise ValueError("--context-window and --max-output-tokens must be positive integers")
    return Window(context_window, max_output, model)
