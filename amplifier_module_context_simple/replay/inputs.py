"""What a command replays: the options given, checked, and the messages they name.

Every problem is a :class:`CliError`; a transcript's unusable lines are skipped with a warning
(or, with ``--strict``, fail the command).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

from .. import ContextConfig
from .config_options import build_config
from .errors import CliError, one_line
from .example_session import generate_session
from .simulation import EXAMPLE_WINDOW, Window, build_window
from .transcripts import TranscriptError, load_transcript

__all__ = [
    "EXAMPLE_MESSAGES",
    "EXAMPLE_SEED",
    "ReplayInput",
    "SharedOptions",
    "prepare",
]

EXAMPLE_SEED = 7
EXAMPLE_MESSAGES = 400
SHOWN_SKIPPED_LINES = 5


@dataclass(frozen=True)
class SharedOptions:
    """The options ``replay`` and ``inspect`` share, as given (``None``: not given)."""

    transcript: str | None
    config_values: dict[str, Any]
    """``ContextConfig`` key -> value, for the keys on the command line."""
    context_window: int | None
    max_output_tokens: int | None
    model: str | None
    strict: bool
    seed: int | None
    messages: int | None


@dataclass
class ReplayInput:
    """The messages to replay and the settings to replay them with."""

    messages: list[dict[str, Any]]
    source: dict[str, Any]
    config: ContextConfig
    window: Window | None


def prepare(options: SharedOptions) -> ReplayInput:
    """Validate the options and load the messages; every problem is a :class:`CliError`."""
    context_window, max_output = options.context_window, options.max_output_tokens
    try:
        config = build_config(
            options.config_values, model=options.model, window=context_window is not None
        )
    except ValueError as exc:
        raise CliError(one_line(str(exc))) from None
    if options.transcript is None:
        messages, source = _example(options)
        if context_window is None:
            context_window = EXAMPLE_WINDOW.context_window
            max_output = max_output or EXAMPLE_WINDOW.max_output_tokens
    else:
        if options.seed is not None or options.messages is not None:
            raise CliError("--seed and --messages only apply to the built-in example session")
        messages, source = _transcript(options.transcript, strict=options.strict)
    try:
        window = build_window(context_window, max_output, options.model, config)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return ReplayInput(messages, source, config, window)


def _example(options: SharedOptions) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    seed = EXAMPLE_SEED if options.seed is None else options.seed
    count = EXAMPLE_MESSAGES if options.messages is None else options.messages
    if count < 2:
        raise CliError(f"--messages must be at least 2; got {count}")
    source = {
        "name": f"the built-in example session (seed {seed})",
        "format": "example",
        "messages": count,
        "skipped_lines": [],
        "window_given": options.context_window is not None,
    }
    return generate_session(count, seed=seed), source


def _transcript(transcript: str, *, strict: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        loaded = load_transcript(transcript, strict=strict)
    except TranscriptError as exc:
        raise CliError(one_line(str(exc))) from None
    skipped = [{"line": e.line_number, "reason": e.reason} for e in loaded.skipped]
    source = {
        "name": "standard input" if transcript == "-" else transcript,
        "format": loaded.format,
        "messages": len(loaded.messages),
        "skipped_lines": skipped,
    }
    for error in loaded.skipped[:SHOWN_SKIPPED_LINES]:
        typer.echo(f"context-simple: warning: skipped {error}", err=True)
    if len(loaded.skipped) > SHOWN_SKIPPED_LINES:
        more = len(loaded.skipped) - SHOWN_SKIPPED_LINES
        typer.echo(f"context-simple: warning: skipped {more} more line(s)", err=True)
    return loaded.messages, source
