"""Which agent's log a file is, and reading it: the one place the formats are tried in order.

A name is tried as, in order: a Cline task folder (or its ``api_conversation_history.json``),
an OpenCode database (by its SQLite header), one pretty-printed JSON document (an ``opencode
export``, a Cline history, a plain list of messages or ``{"messages": [...]}``), then line by
line as a Pi session or a Codex rollout. Claude Code logs and Amplifier transcripts are read
by their own modules after these (``command/inputs.py``). :func:`read_agent_log` says why
each format it tried did not fit (:attr:`Attempt.tried`), for the error that refuses a file no
reader takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .claude_code_log import FORMAT as CLAUDE_CODE
from .cline_task import FORMAT as CLINE
from .cline_task import HISTORY_NAME, METADATA_NAME, cline_problem, load_cline_task
from .codex_log import FORMAT as CODEX
from .codex_log import codex_problem, load_codex_log
from .opencode_log import FORMAT as OPENCODE
from .opencode_log import (
    SQLITE_MAGIC,
    load_opencode_database,
    load_opencode_export,
    opencode_export_problem,
)
from .pi_log import FORMAT as PI
from .pi_log import load_pi_log, pi_problem
from .recorded_log import LoadedLog, json_objects, parse_json
from .transcripts import LoadedTranscript, TranscriptError, as_message, collect_messages

__all__ = ["AGENT_LOG_FORMATS", "Attempt", "read_agent_log"]

AGENT_LOG_FORMATS = frozenset({CLAUDE_CODE, CODEX, CLINE, OPENCODE, PI})
"""The agents' own logs: each records its usage but no system prompt or tool definitions."""

_HEAD_LINES = 50
_LineFormat = tuple[str, Callable[[list[dict[str, Any]]], str], Callable[..., LoadedLog]]
_LINE_FORMATS: tuple[_LineFormat, ...] = (
    ("Pi session", pi_problem, load_pi_log),
    ("Codex rollout", codex_problem, load_codex_log),
)


@dataclass
class Attempt:
    """What reading a name found: an agent's log, a plain JSON document of messages, or
    neither (then ``tried`` says why each format did not fit)."""

    log: LoadedLog | None = None
    document: LoadedTranscript | None = None
    tried: list[str] = field(default_factory=list[str])

    def tried_text(self) -> str:
        return "; ".join(self.tried)


def read_agent_log(path: Path, *, session: str | None = None, strict: bool = False) -> Attempt:
    """Read ``path`` as the first agent format it fits (``session``: which session of an
    OpenCode database); a file that fits a format but holds nothing usable raises
    :class:`TranscriptError`."""
    attempt = Attempt()
    if path.is_dir():
        history = path / HISTORY_NAME
        if history.is_file():
            attempt.log = _cline(history)
        else:
            attempt.tried.append(f"Cline task folder: no {HISTORY_NAME} in it")
        return attempt
    if not path.is_file():
        return attempt
    try:
        with path.open("rb") as stream:
            magic = stream.read(len(SQLITE_MAGIC))
    except OSError:
        return attempt
    if magic == SQLITE_MAGIC:
        attempt.log = load_opencode_database(path, session)
        return attempt
    attempt.tried.append("OpenCode database: no SQLite header")
    if _document(path, attempt, strict=strict):
        return attempt
    _lines(path, attempt)
    return attempt


def _cline(history: Path) -> LoadedLog:
    value, reason = parse_json(_bytes(history))
    if reason:
        raise TranscriptError(f"{history}: {reason}")
    return load_cline_task(value, str(history), history.parent / METADATA_NAME)


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None


def _document(path: Path, attempt: Attempt, *, strict: bool) -> bool:
    """Read ``path`` as one JSON document; False when it is none (JSON Lines, say).

    A first line that is a whole JSON object is a line of a JSONL file (unless it is an
    export on one line), so a large transcript is never read whole here."""
    try:
        with path.open("rb") as stream:
            first = stream.readline()
    except OSError:
        return False
    if first.lstrip()[:1] not in (b"[", b"{"):
        attempt.tried.append("JSON document: it does not begin with [ or {")
        return False
    value, reason = parse_json(first)
    if not reason and isinstance(value, dict) and opencode_export_problem(value):
        attempt.tried.append("JSON document: its first line is a whole object (JSON Lines)")
        return False
    if reason:
        value, reason = parse_json(_bytes(path))
    if reason:
        attempt.tried.append(f"one JSON document: {reason}")
        return False
    if path.name == HISTORY_NAME or not cline_problem(value):
        attempt.log = load_cline_task(value, str(path), path.parent / METADATA_NAME)
        return True
    if not opencode_export_problem(value):
        attempt.log = load_opencode_export(cast("dict[str, Any]", value), str(path))
        return True
    messages = _messages_of(value)
    if messages is None:
        attempt.tried.append(
            f"JSON document: {opencode_export_problem(value)}; {cline_problem(value)}; "
            'not a list of messages or {"messages": [...]}'
        )
        return False
    parsed = ((n, *as_message(m)) for n, m in enumerate(messages, 1))
    attempt.document = collect_messages(parsed, label=str(path), strict=strict, unit="message")
    return True


def _messages_of(value: object) -> list[Any] | None:
    """The messages of a plain JSON document: a list, or the ``messages`` of an object; None
    when it is a single message or neither (one message is a line of a JSONL file)."""
    if isinstance(value, dict):
        value = cast("dict[str, Any]", value).get("messages")
    if isinstance(value, list) and all(
        isinstance(m, dict) and "role" in m for m in cast("list[Any]", value)
    ):
        return cast("list[Any]", value)
    return None


def _lines(path: Path, attempt: Attempt) -> None:
    with path.open("rb") as stream:
        head = [v for _, v, _ in json_objects(_first(stream)) if v is not None]
    for name, problem, load in _LINE_FORMATS:
        why = problem(head)
        if why:
            attempt.tried.append(f"{name}: {why}")
            continue
        with path.open("rb") as stream:
            attempt.log = load(stream, str(path))
        return


def _first(stream: Any) -> list[bytes]:
    return [line for _, line in zip(range(_HEAD_LINES), stream, strict=False)]
