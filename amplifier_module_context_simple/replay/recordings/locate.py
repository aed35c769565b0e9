"""Where the name given on the command line points, before anything is read.

A name is a file, an Amplifier session directory, a Claude Code project folder
(``~/.claude/projects/<project>/``: one ``<session id>.jsonl`` log per session), a log in such
a folder named by the start of its id (``<folder>/<id>``), a Cline task folder, a folder of
another agent's sessions (the newest is replayed), or a bare session id looked up under both
homes (``~/.amplifier/projects/*/sessions/<id>/`` and ``~/.claude/projects/*/<id>.jsonl``),
then in the other agents' homes (``agent_homes``: Codex, Pi, Cline, OpenCode).
:func:`locate` turns it into the path the readers take, and says on standard error which log
of a project folder it picked; a directory that is none of these is refused with every layout
the tool reads. The home directory is ``Path.home()`` (``$HOME``), so tests point it elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import CliError
from .agent_homes import (
    AgentSession,
    agent_homes,
    find_by_id,
    folder_sessions,
    is_sub_agent_log,
)
from .claude_code_log import is_claude_code_log
from .cline_task import HISTORY_NAME
from .session_dir import EVENTS_NAME, SESSIONS_GLOB, SessionError, find_session
from .transcripts import ACCEPTED_LAYOUTS, TRANSCRIPT_NAME

__all__ = [
    "CLAUDE_PROJECTS_GLOB",
    "Located",
    "claude_code_logs",
    "locate",
    "not_found_text",
]

CLAUDE_PROJECTS_GLOB = ".claude/projects/*"
"""Where Claude Code keeps one folder per project, under the home directory."""
SHOWN_LOGS = 5


@dataclass(frozen=True)
class Located:
    """The path to read (``-``: standard input) and, for a project folder, what was found."""

    name: str
    notes: tuple[str, ...] = ()
    session: str | None = None
    """Which session of the file ``name`` holds many (an OpenCode database)."""


def locate(source: str) -> Located:
    """The path ``source`` points to; :class:`CliError` for a directory no reader takes and
    for a session id that names more than one session."""
    if source == "-":
        return Located(source)
    path = Path(source).expanduser()
    if path.is_dir():
        return _directory(path)
    if path.exists():
        return Located(source)
    named = _named_in_folder(path)
    if named is not None:
        return Located(str(named))
    if "/" in source or not source or source in {".", ".."}:
        return Located(source)
    try:
        amplifier, ambiguous = find_session(source), ""
    except SessionError as exc:
        amplifier, ambiguous = None, str(exc)
    found = _claude_code_ids(source)
    if amplifier is None and not found and not ambiguous:
        return _agent_id(source)
    also = f"; {len(found)} Claude Code log(s) match too" if found else ""
    if ambiguous:
        raise CliError(ambiguous + also)
    if amplifier is not None and found:
        raise CliError(
            f"session id {source!r} is ambiguous: the Amplifier session {amplifier}" + also
        )
    if amplifier is not None:
        return Located(source)  # session_dir reads it
    if len(found) > 1:
        names = ", ".join(str(p) for p in found[:SHOWN_LOGS])
        more = " ..." if len(found) > SHOWN_LOGS else ""
        raise CliError(
            f"session id {source!r} is ambiguous: {len(found)} Claude Code logs match: "
            f"{names}{more}"
        )
    if found:
        return Located(str(found[0]))
    return Located(source)


def claude_code_logs(folder: Path) -> list[Path]:
    """The Claude Code session logs directly in ``folder``, newest first (by modification
    time, then name)."""
    logs = [p for p in folder.glob("*.jsonl") if not is_sub_agent_log(p) and is_claude_code_log(p)]
    return sorted(logs, key=lambda p: (-p.stat().st_mtime, p.name))


def not_found_text(source: str) -> str | None:
    """Why ``source`` names nothing, when it could have been a session id (no ``/``, not a
    path that exists): where ids were looked for and how many sessions each place holds."""
    if not source or "/" in source or source in {".", "..", "-"} or Path(source).exists():
        return None
    home = Path.home()
    amplifier = sum(1 for p in home.glob(SESSIONS_GLOB + "/*") if p.is_dir())
    claude = sum(1 for _ in home.glob(CLAUDE_PROJECTS_GLOB + "/*.jsonl"))
    others = [(h, len(folder_sessions(h))) for h in agent_homes() if h.is_dir()]
    elsewhere = "".join(f", {h}/ ({n:,} session(s) there)" for h, n in others)
    return (
        f"no such file or directory: {source}, and no session id starts with it under "
        f"{home / SESSIONS_GLOB}/ ({amplifier:,} session(s) there) or "
        f"{home / CLAUDE_PROJECTS_GLOB}/ ({claude:,} log(s) there){elsewhere}"
    )


def _directory(path: Path) -> Located:
    if (path / TRANSCRIPT_NAME).is_file():
        return Located(str(path))  # an Amplifier session directory
    logs = claude_code_logs(path)
    if logs:
        return Located(str(logs[0]), (_listing(path, logs),))
    if (path / HISTORY_NAME).is_file():
        return Located(str(path))  # a Cline task folder
    sessions = folder_sessions(path)
    if sessions:
        return Located(
            str(sessions[0].path), (_agent_listing(path, sessions),), sessions[0].session
        )
    held = (
        " (it holds an events.jsonl but no transcript.jsonl)"
        if (path / EVENTS_NAME).is_file()
        else ""
    )
    raise CliError(
        f"{path} is a directory the tool does not read{held}; it reads {ACCEPTED_LAYOUTS}"
    )


def _listing(folder: Path, logs: list[Path]) -> str:
    shown = "; ".join(_described(p) for p in logs[:SHOWN_LOGS])
    more = f"; {len(logs) - SHOWN_LOGS} more" if len(logs) > SHOWN_LOGS else ""
    return (
        f"{folder} is a Claude Code project folder with {len(logs)} session log(s), newest "
        f"first: {shown}{more}. Replaying the newest, {logs[0].stem}; name another as "
        f"{folder}/<session id> (the start of the id is enough)"
    )


def _agent_listing(folder: Path, sessions: list[AgentSession]) -> str:
    shown = "; ".join(s.name for s in sessions[:SHOWN_LOGS])
    more = f"; {len(sessions) - SHOWN_LOGS} more" if len(sessions) > SHOWN_LOGS else ""
    return (
        f"{folder} holds {len(sessions)} agent session(s), newest first: {shown}{more}. "
        f"Replaying the newest, {sessions[0].name}; name another by its session id"
    )


def _described(log: Path) -> str:
    stat = log.stat()
    when = datetime.fromtimestamp(stat.st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{log.stem} ({when}, {stat.st_size:,} bytes)"


def _named_in_folder(path: Path) -> Path | None:
    """``<project folder>/<start of an id>``: the one log of that folder whose id begins so."""
    folder = path.parent
    if not folder.is_dir() or (folder / TRANSCRIPT_NAME).is_file():
        return None
    stem = path.name.removesuffix(".jsonl")
    logs = claude_code_logs(folder)
    exact = [p for p in logs if p.stem == stem]
    matches = exact or [p for p in logs if stem and p.stem.startswith(stem)]
    if len(matches) > 1:
        names = ", ".join(p.stem for p in matches[:SHOWN_LOGS])
        raise CliError(
            f"{path.name!r} is ambiguous in {folder}: {len(matches)} logs match: {names}"
        )
    return matches[0] if matches else None


def _claude_code_ids(session_id: str) -> list[Path]:
    logs = sorted(Path.home().glob(CLAUDE_PROJECTS_GLOB + "/*.jsonl"))
    exact = [p for p in logs if p.stem == session_id]
    # An exact id wins over longer ids it begins; otherwise a prefix, as for Amplifier ids.
    matches = exact or [p for p in logs if p.stem.startswith(session_id)]
    return [p for p in matches if not is_sub_agent_log(p) and is_claude_code_log(p)]


def _agent_id(session_id: str) -> Located:
    """A session id looked up in the other agents' homes (Codex, Pi, Cline, OpenCode)."""
    found = find_by_id(session_id)
    if len(found) > 1:
        names = ", ".join(str(s.path) + (f" {s.session}" if s.session else "") for s in found)
        raise CliError(
            f"session id {session_id!r} is ambiguous: {len(found)} sessions match: {names}"
        )
    if found:
        return Located(str(found[0].path), session=found[0].session)
    return Located(session_id)
