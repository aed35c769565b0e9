"""What a command replays: the options given, checked, and the messages they name.

Every problem is a :class:`CliError`; a transcript's unusable lines are skipped with a warning
(or, with ``--strict``, fail the command).

A session directory (or a session id) that has an events file is replayed with the session's
own settings: its recorded context config, its model's window and tokenizer family, and its
recorded requests (system prompt and usage, fed to the engine by :meth:`ReplayInput.recorded`).
Flags override key by key; ``source["settings"]`` says where each setting came from.

A Claude Code session log (found by :func:`..recordings.claude_code_log.is_claude_code_log`, no flag
needed) is replayed the same way with what it records: its model (so the model table's window
and tokenizer family) and each response's usage; it records no system prompt or tools.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from ... import ContextConfig
from ..engine.config_options import build_config
from ..engine.session_settings import describe_settings, resolve_settings
from ..errors import CliError, one_line
from ..findings.rework import (
    FROM_EVENTS,
    Rework,
    events_compactions,
    find_rework,
    log_compactions,
)
from ..provider.simulation import EXAMPLE_WINDOW, Window, build_window
from ..recordings.agent_logs import Attempt, read_agent_log
from ..recordings.claude_code_log import (
    NOT_A_CLAUDE_CODE_LOG,
    LoadedLog,
    is_claude_code_log,
    load_claude_code_log,
    looks_like_claude_code_log,
    parse_claude_code_log,
)
from ..recordings.conversations import CONVERSATION_FLAG, is_conversation_file, load_conversation
from ..recordings.example_session import generate_session
from ..recordings.locate import locate, not_found_text
from ..recordings.session_dir import (
    RecordedRequest,
    RecordedSession,
    SessionError,
    find_session,
    read_session,
)
from ..recordings.transcripts import LineError, LoadedTranscript, TranscriptError, load_transcript

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
    overhead: int | None = None
    """``--overhead``: what a bare transcript lacks, for the window breakdown (payload.py)."""
    conversation: int | None = None
    """``--conversation``: which conversation of a file holding one per line."""


@dataclass
class ReplayInput:
    """The messages to replay and the settings to replay them with."""

    messages: list[dict[str, Any]]
    source: dict[str, Any]
    config: ContextConfig
    window: Window | None
    session: RecordedSession | None = None
    """The recorded session whose settings and requests the replay uses, if any."""
    log: LoadedLog | None = None
    """A Claude Code log's requests (its usage), when that is what is replayed."""
    token_family: str | None = None
    settings: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """``{"name", "value", "source"}`` per setting (also ``source["settings"]``, to which the
    replay adds the budget it derived)."""
    overhead: int | None = None
    """``--overhead``: tokens each request carries beyond a bare transcript's view."""

    def rework(self, family: str | None) -> Rework | None:
        """Calls repeated after the recording's own compactions (``None``: it records none
        it could have made: a bare transcript, or a session without an events file)."""
        model = self.window.model if self.window is not None else None
        recorded = self.log.compactions if self.log is not None else []
        if self.log is not None:
            found, source = log_compactions(self.log), self.log.compaction_mark
        elif self.session is not None and self.session.events is not None:
            found, source = events_compactions(self.session.events), FROM_EVENTS
        else:
            return None
        return find_rework(
            self.messages, found, source=source, family=family, model=model, recorded=recorded
        )

    def boundaries(self) -> list[int]:
        """Where the agent's own compactions started its history afresh (``LoadedLog``'s
        segment starts; none for any other source)."""
        return self.log.segment_starts if self.log is not None else []

    def recorded(self) -> Iterator[RecordedRequest] | None:
        """The session's recorded requests, streamed (``None``: no session)."""
        if self.log is not None:
            return self.log.requests()
        return self.session.requests() if self.session is not None else None


def prepare(options: SharedOptions) -> ReplayInput:
    """Validate the options and load the messages; every problem is a :class:`CliError`."""
    session: RecordedSession | None = None
    log: LoadedLog | None = None
    if options.transcript is not None and (
        options.seed is not None or options.messages is not None
    ):
        raise CliError("--seed and --messages only apply to the built-in example session")
    piped = _stdin(options.transcript)
    given = options.transcript
    session_id: str | None = None
    attempt = Attempt()
    if given is not None:
        located = locate(given)
        given, session_id = located.name, located.session
        for note in located.notes:
            typer.echo(f"context-simple: {note}", err=True)
    lines = piped.split("\n") if piped is not None else None
    if given is not None and is_conversation_file(lines or _head(given)):
        messages, source = _conversation(given, lines, options)
    elif options.conversation is not None:
        raise CliError(
            f"{CONVERSATION_FLAG} applies only to a file holding one conversation per line "
            '({"messages": [...]})'
        )
    elif given is None:
        messages, source = _example(options)
    elif (attempt := _agent_attempt(given, piped, session_id, options.strict)).log is not None:
        log = attempt.log
        session, source = _log_session(log, given), _log_source(log, given)
        messages = log.messages
    elif attempt.document is not None:
        messages, source = _loaded_source(attempt.document, given)
    elif _is_log(given, piped):
        log, session, source = _claude_code_log(given, piped, strict=options.strict)
        messages = log.messages
    else:
        found = _session(given, strict=options.strict)
        session = found if found is not None and found.events is not None else None
        name = str(found.directory) if found is not None else given
        # Only a file the agents' readers looked into has their reasons to give.
        looked = found is None and attempt.tried
        tried = "; ".join([attempt.tried_text(), NOT_A_CLAUDE_CODE_LOG]) if looked else ""
        messages, source = _transcript(name, strict=options.strict, stdin=piped, tried=tried)
        source["name"] = "standard input" if name == "-" else given
        if found is not None and session is None and found.notes:
            # A directory with no events file to read: the transcript is replayed alone, and
            # what was found instead (an events.jsonl that is a directory) is still said.
            source["session_notes"] = list(found.notes)
            for note in found.notes:
                typer.echo(f"context-simple: warning: {note}", err=True)
    resolved = resolve_settings(
        session,
        config_flags=options.config_values,
        model=options.model,
        context_window=options.context_window,
        max_output_tokens=options.max_output_tokens,
        default_window=EXAMPLE_WINDOW if options.transcript is None else None,
    )
    try:
        config = build_config(
            resolved.config_values,
            model=resolved.model,
            window=resolved.context_window is not None,
        )
    except ValueError as exc:
        raise CliError(one_line(str(exc))) from None
    try:
        window = build_window(resolved.context_window, resolved.max_output_tokens, resolved.model)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    settings = [s.as_json() for s in describe_settings(resolved, config, window)]
    source["settings"] = settings
    if log is not None:
        source["session_notes"] = [*source["session_notes"], *resolved.warnings]
        session = None  # its settings are taken; its requests come from the log
    elif session is not None:
        source.update(_session_source(session, resolved.ignored_keys, resolved.warnings))
    for warning in resolved.warnings:
        typer.echo(f"context-simple: warning: {warning}", err=True)
    family = next(s["value"] for s in settings if s["name"] == "token_family")
    _check_overhead(options.overhead, config, window)
    return ReplayInput(
        messages, source, config, window, session, log, family, settings, overhead=options.overhead
    )


def _check_overhead(overhead: int | None, config: ContextConfig, window: Window | None) -> None:
    """Refuse an ``--overhead`` below 0 or as large as the window the replay runs on (the
    simulated one, else the budget a request gets without one): no request could carry it,
    and the stand-in the budget holds back (``given_overhead``) is text of that size."""
    if overhead is None:
        return
    if overhead < 0:
        raise CliError(f"--overhead must be 0 or more; got {overhead}")
    if window is not None:
        bound, named = window.context_window, "the context window"
    else:
        bound, named = config.max_tokens_fallback, "max_tokens_fallback (no window is known)"
    if overhead >= bound:
        raise CliError(
            f"--overhead {overhead:,} is more than any request can carry: it must be below "
            f"{named} ({bound:,} tokens)"
        )


def _session(transcript: str, *, strict: bool) -> RecordedSession | None:
    """The session ``transcript`` names, when it is a session directory (or id); its
    ``events`` is ``None`` when it has no events file (then it is replayed as a transcript)."""
    if transcript == "-":
        return None
    try:
        directory = find_session(transcript)
        if directory is None:
            return None
        session = read_session(directory, strict=strict)
    except SessionError as exc:
        raise CliError(one_line(str(exc))) from None
    if session.events is None:
        return session  # a transcript and nothing else: replayed as one
    for error in session.skipped[:SHOWN_SKIPPED_LINES]:
        typer.echo(f"context-simple: warning: {session.events.name}: skipped {error}", err=True)
    if len(session.skipped) > SHOWN_SKIPPED_LINES:
        more = len(session.skipped) - SHOWN_SKIPPED_LINES
        typer.echo(f"context-simple: warning: skipped {more} more events line(s)", err=True)
    return session


def _session_source(
    session: RecordedSession, ignored: list[str], warnings: list[str]
) -> dict[str, Any]:
    events = session.events
    return {
        "session_directory": str(session.directory),
        "events": str(events.relative_to(session.directory)) if events else None,
        "recorded_requests": session.request_count,
        "resumes": session.resumes,
        "skipped_event_lines": [
            {"line": e.line_number, "reason": e.reason} for e in session.skipped
        ],
        "ignored_config_keys": ignored,
        "session_notes": [*session.notes, *warnings],
    }


def _stdin(transcript: str | None) -> str | None:
    """Standard input's text when it is what is replayed (``-``), else ``None``; read here
    once, as both the log check and the loader need it."""
    if transcript != "-":
        return None
    try:
        return sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read standard input: {exc}") from None


def _is_log(transcript: str, piped: str | None) -> bool:
    if piped is not None:
        return looks_like_claude_code_log(piped.split("\n"))
    return transcript != "-" and is_claude_code_log(Path(transcript).expanduser())


def _agent_attempt(given: str, piped: str | None, session: str | None, strict: bool) -> Attempt:
    """``given`` read as another agent's log (Codex, Cline, OpenCode, Pi) or a plain JSON
    document of messages; standard input is read as JSON Lines only."""
    if piped is not None or given == "-":
        return Attempt()
    try:
        return read_agent_log(Path(given).expanduser(), session=session, strict=strict)
    except TranscriptError as exc:
        raise CliError(one_line(str(exc))) from None


def _claude_code_log(
    name: str, piped: str | None, *, strict: bool
) -> tuple[LoadedLog, RecordedSession, dict[str, Any]]:
    """The log (``piped``: standard input's text), a session standing for it in the settings
    (its model), and its source."""
    path = Path(name).expanduser()
    try:
        if piped is not None:
            log = parse_claude_code_log(piped, strict=strict)
        else:
            log = load_claude_code_log(path, strict=strict)
    except TranscriptError as exc:
        raise CliError(one_line(str(exc))) from None
    label = "standard input" if piped is not None else name
    return log, _log_session(log, name), _log_source(log, label)


def _log_session(log: LoadedLog, name: str) -> RecordedSession:
    """A session standing for an agent's log in the settings: its model, and the window it
    records (as a recorded budget's)."""
    _warn_skipped(log.skipped)
    path = Path(name).expanduser()
    window = {"context_window": log.context_window} if log.context_window else None
    return RecordedSession(
        directory=path.parent, transcript=path, metadata={}, events=None,
        context_module=None, context_config={}, provider_module=None, provider_config={},
        model=log.model, budget_event=window, usages=[], request_count=log.request_count,
    )  # fmt: skip


def _log_source(log: LoadedLog, label: str) -> dict[str, Any]:
    return {
        "name": label,
        "format": log.format,
        "messages": len(log.messages),
        "skipped_lines": [{"line": e.line_number, "reason": e.reason} for e in log.skipped],
        "recorded_requests": log.request_count,
        "session_notes": list(log.notes),
    }


def _loaded_source(
    loaded: LoadedTranscript, name: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    _warn_skipped(loaded.skipped)
    return loaded.messages, {
        "name": name,
        "format": loaded.format,
        "messages": len(loaded.messages),
        "skipped_lines": [{"line": e.line_number, "reason": e.reason} for e in loaded.skipped],
    }


def _warn_skipped(skipped: list[LineError]) -> None:
    for error in skipped[:SHOWN_SKIPPED_LINES]:
        typer.echo(f"context-simple: warning: skipped {error}", err=True)
    if len(skipped) > SHOWN_SKIPPED_LINES:
        more = len(skipped) - SHOWN_SKIPPED_LINES
        typer.echo(f"context-simple: warning: skipped {more} more line(s)", err=True)


def _head(name: str) -> list[bytes]:
    """The first lines of the file ``name`` (none for a directory or a name that is no file),
    for the sniffing readers."""
    path = Path(name).expanduser()
    if not path.is_file():
        return []
    try:
        with path.open("rb") as stream:
            return [line for _, line in zip(range(50), stream, strict=False)]
    except OSError:
        return []


def _conversation(
    name: str, lines: list[str] | None, options: SharedOptions
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One conversation of a file holding one per line (``lines``: standard input's)."""
    label = "standard input" if lines is not None else name
    try:
        if lines is not None:
            chosen = load_conversation(
                lines, label=label, choice=options.conversation, strict=options.strict
            )
        else:
            with Path(name).expanduser().open("rb") as stream:
                chosen = load_conversation(
                    stream, label=label, choice=options.conversation, strict=options.strict
                )
    except TranscriptError as exc:
        raise CliError(one_line(str(exc))) from None
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from None
    loaded = chosen.loaded
    _warn_skipped(loaded.skipped)
    source: dict[str, Any] = {
        "name": label,
        "format": loaded.format,
        "messages": len(loaded.messages),
        "skipped_lines": [{"line": e.line_number, "reason": e.reason} for e in loaded.skipped],
        "conversation": chosen.number,
        "conversations": chosen.count,
    }
    return loaded.messages, source


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


def _transcript(
    transcript: str, *, strict: bool, stdin: str | None, tried: str = ""
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        text = None if stdin is None else io.StringIO(stdin)
        loaded = load_transcript(transcript, strict=strict, stdin=text)
    except TranscriptError as exc:
        # A name that is no file may have been meant as a session id: say where ids were looked for.
        text, recognised, layouts = str(exc).partition("; recognised: ")
        if tried:  # why each agent's format did not fit either, before the list of layouts
            text += f"; nor another agent's log ({tried})"
        raise CliError(
            not_found_text(transcript) or one_line(text + recognised + layouts)
        ) from None
    return _loaded_source(loaded, "standard input" if transcript == "-" else transcript)
