"""Where each coding agent keeps its logs, and which of them a folder or a session id names.

* Codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``;
* Pi: ``~/.pi/agent/sessions/--<path>--/<time>_<session id>.jsonl``;
* Cline: one folder per task, ``~/.cline/data/tasks/<task id>/`` (the CLI) or the VS Code
  extension's ``.../globalStorage/saoudrizwan.claude-dev/tasks/<task id>/``;
* OpenCode 1.2+: one database, ``$XDG_DATA_HOME/opencode/opencode.db`` (``~/.local/share``
  when the variable is unset), its sessions ``ses_...``.

The home directory is ``Path.home()`` (``$HOME``), so tests point it elsewhere.
:func:`folder_sessions` lists what a folder holds, newest first; :func:`find_by_id` looks an id
up in every home.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .cline_task import HISTORY_NAME
from .opencode_log import DATABASE_NAME, database_sessions

__all__ = ["AgentSession", "agent_homes", "find_by_id", "folder_sessions", "is_sub_agent_log"]

_CODEX = ".codex/sessions"
_PI = ".pi/agent/sessions"
_CLINE = (
    ".cline/data/tasks",
    ".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
    "Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev/tasks",
)
_DEPTH = 4  # Codex nests its rollouts three folders down (year, month, day)
SUB_AGENT_PREFIX = "agent-"
_UUID = 36  # characters of a session uuid


@dataclass(frozen=True)
class AgentSession:
    """One session found: the path to read, the OpenCode session in it, and its time."""

    path: Path
    session: str | None
    updated: float

    @property
    def name(self) -> str:
        return self.session or (self.path.name if self.path.is_dir() else self.path.stem)


def is_sub_agent_log(path: Path) -> bool:
    """A sub-agent's own log (``agent-*.jsonl`` beside a Claude Code session): never a
    session of its own."""
    return path.name.startswith(SUB_AGENT_PREFIX)


def agent_homes() -> list[Path]:
    """Every folder an agent keeps its logs in, under the home directory."""
    home = Path.home()
    return [home / _CODEX, home / _PI, *(home / c for c in _CLINE), _opencode_data()]


def _opencode_data() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local/share")
    return Path(data) / "opencode"


def folder_sessions(folder: Path) -> list[AgentSession]:
    """The agents' sessions ``folder`` holds (a Cline task folder, a folder of Codex or Pi logs
    or of Cline tasks, an OpenCode data folder), newest first."""
    found: list[AgentSession] = []
    database = folder / DATABASE_NAME
    if database.is_file():
        with contextlib.suppress(sqlite3.Error):  # unreadable: the folder's other sessions
            found += [
                AgentSession(database, sid, updated / 1000)
                for sid, _, updated in database_sessions(database)
            ]
    found += [
        AgentSession(task, None, (task / HISTORY_NAME).stat().st_mtime)
        for task in folder.iterdir()
        if (task / HISTORY_NAME).is_file()
    ]
    found += [AgentSession(log, None, log.stat().st_mtime) for log in _logs(folder, _DEPTH)]
    return sorted(found, key=lambda s: (-s.updated, s.name))


def _logs(folder: Path, depth: int) -> list[Path]:
    """The Codex and Pi logs under ``folder``, ``depth`` folders down at most."""
    logs: list[Path] = []
    for entry in folder.iterdir():
        if entry.is_dir() and depth > 0:
            logs += _logs(entry, depth - 1)
        elif entry.suffix == ".jsonl" and _agent_log_name(entry):
            logs.append(entry)
    return logs


def _agent_log_name(path: Path) -> bool:
    # Codex names its rollouts rollout-<time>-<uuid>; Pi its sessions <time>_<uuid>.
    return path.name.startswith("rollout-") or len(path.stem.rsplit("_", 1)[-1]) == _UUID


def find_by_id(session_id: str) -> list[AgentSession]:
    """The sessions in every agent's home whose id is ``session_id`` or begins with it (an
    exact id wins over longer ones it begins)."""
    candidates = [s for home in agent_homes() if home.is_dir() for s in folder_sessions(home)]
    exact = [s for s in candidates if _id_of(s) == session_id]
    return exact or [s for s in candidates if _id_of(s).startswith(session_id)]


def _id_of(session: AgentSession) -> str:
    """The session id a user would give: OpenCode's, a Cline task's folder, the uuid that
    ends a Codex or Pi file name."""
    if session.session is not None:
        return session.session
    if session.path.is_dir():
        return session.path.name
    stem = session.path.stem
    if stem.startswith("rollout-"):
        return stem[-_UUID:]  # rollout-<time>-<uuid>
    return stem.rsplit("_", 1)[-1]
