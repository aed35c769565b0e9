"""Reading OpenCode sessions: an ``opencode export`` file or OpenCode 1.2+'s SQLite database.

An export is one JSON document, ``{"info": <session>, "messages": [{"info", "parts"}]}``. The
database (``$XDG_DATA_HOME/opencode/opencode.db``) holds the same objects: the ``session``
table, and the ``data`` JSON of each row of ``message`` (an export's ``info``) and ``part`` (one
of its ``parts``); it is opened read-only and its columns are read by name, so later versions'
extra columns change nothing.

An assistant message is one or more steps, each one provider call: a ``step-start`` part, the
``reasoning``, ``text`` and ``tool`` parts of the answer, and a ``step-finish`` part with the
call's ``tokens`` (``input`` without the cache, ``output``, ``reasoning``, ``cache.read``,
``cache.write``). Each step is replayed as one assistant message and each completed tool part's
output as its result. A user message holding a ``compaction`` part is OpenCode's own
compaction: the summary that answers it is what OpenCode sends from then on.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, cast

from .recorded_log import LoadedLog, LogBuilder, host_usage, parse_json
from .session_dir import RecordedUsage
from .transcripts import TranscriptError, normalise_tool_call

__all__ = [
    "DATABASE_NAME",
    "FORMAT",
    "SQLITE_MAGIC",
    "database_sessions",
    "load_opencode_database",
    "load_opencode_export",
    "opencode_export_problem",
]

FORMAT = "opencode"
COMPACTION_MARK = f"{FORMAT} compaction parts"
DATABASE_NAME = "opencode.db"
SQLITE_MAGIC = b"SQLite format 3\x00"


def opencode_export_problem(document: object) -> str:
    """Why a JSON document is no ``opencode export`` ("" when it is one)."""
    if (
        isinstance(document, dict)
        and isinstance(cast("dict[str, Any]", document).get("info"), dict)
        and isinstance(cast("dict[str, Any]", document).get("messages"), list)
    ):
        return ""
    return 'not {"info": {...}, "messages": [{"info", "parts"}]}'


def load_opencode_export(document: dict[str, Any], label: str) -> LoadedLog:
    messages = cast("list[Any]", document.get("messages") or [])
    return _read(
        [m for m in messages if isinstance(m, dict)], label, note=f"an opencode export ({label})"
    )


def database_sessions(path: Path) -> list[tuple[str, str, int]]:
    """The sessions of an OpenCode database: ``(id, title, time_updated)``, newest first."""
    with _connect(path) as db:
        rows = db.execute("SELECT id, title, time_updated FROM session").fetchall()
    found = [(str(r["id"]), str(r["title"] or ""), int(r["time_updated"] or 0)) for r in rows]
    return sorted(found, key=lambda s: (-s[2], s[0]))


def load_opencode_database(path: Path, session_id: str | None) -> LoadedLog:
    """One session of the database at ``path`` (``None``: the one updated last)."""
    try:
        sessions = database_sessions(path)
        if not sessions:
            raise TranscriptError(f"{path} is an OpenCode database with no session")
        chosen = session_id or sessions[0][0]
        with _connect(path) as db:
            rows = db.execute(
                "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
                (chosen,),
            ).fetchall()
            parts = db.execute(
                "SELECT message_id, data FROM part WHERE session_id = ? ORDER BY time_created, id",
                (chosen,),
            ).fetchall()
    except sqlite3.Error as exc:
        raise TranscriptError(f"{path} cannot be read as an OpenCode database: {exc}") from None
    by_message: dict[str, list[Any]] = {}
    for part in parts:
        value = _json(part["data"])
        if isinstance(value, dict):
            by_message.setdefault(str(part["message_id"]), []).append(value)
    messages: list[dict[str, Any]] = []
    for row in rows:
        info = _json(row["data"])
        if isinstance(info, dict):
            messages.append({"info": info, "parts": by_message.get(str(row["id"]), [])})
    label = f"{path} session {chosen}"
    return _read(messages, label, note=f"OpenCode session {chosen} of {path}")


def _connect(path: Path) -> sqlite3.Connection:
    # Read-only: OpenCode may be writing it (WAL mode).
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def _json(text: object) -> object:
    if not isinstance(text, str | bytes):
        return None
    value, _ = parse_json(text)
    return value


def _read(messages: list[dict[str, Any]], label: str, *, note: str) -> LoadedLog:
    reader = _Reader()
    for message in messages:
        info = message.get("info")
        parts = message.get("parts")
        if isinstance(info, dict) and isinstance(parts, list):
            reader.message(cast("dict[str, Any]", info), cast("list[Any]", parts))
    if not reader.log.messages:
        raise TranscriptError(f"{label} is an OpenCode session with no message")
    return reader.log.build(
        format=FORMAT,
        compaction_mark=COMPACTION_MARK,
        notes=[
            f"{note} records no system prompt and no tool definitions: the window figures "
            "are the replayed views'"
        ],
    )


class _Reader:
    def __init__(self) -> None:
        self.log = LogBuilder()
        self.blocks: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.last_size: int | None = None
        self.compacting = False

    def message(self, info: dict[str, Any], parts: list[Any]) -> None:
        role = info.get("role")
        stamp = _stamp(info)
        if role == "user":
            texts = [p for p in _parts(parts) if p.get("type") == "text"]
            if any(p.get("type") == "compaction" for p in _parts(parts)):
                auto = next(p.get("auto") for p in _parts(parts) if p.get("type") == "compaction")
                self.compacting = True
                trigger = "auto" if auto is True else "manual"
                self.log.compacted(trigger, self.last_size, stamp)
                return
            text = "\n".join(str(p.get("text", "")) for p in texts)
            self.log.add({"role": "user", "content": text})
            return
        if role != "assistant":
            return
        model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
        if self.compacting or info.get("summary") is True:
            # The summary answers the compaction request and is what every later call sends.
            self.compacting = False
            text = "\n".join(
                str(p.get("text", "")) for p in _parts(parts) if p.get("type") == "text"
            )
            self.log.add({"role": "user", "content": text})
            return
        stepped = any(p.get("type") == "step-finish" for p in _parts(parts))
        for part in _parts(parts):
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
                self.blocks.append({"type": "text", "text": part["text"]})
            elif kind == "tool":
                self._tool(part)
            elif kind == "step-finish":
                self._answer(model, _usage(part.get("tokens")))
        if not stepped:
            self._answer(model, _usage(info.get("tokens")))

    def _tool(self, part: dict[str, Any]) -> None:
        state = part.get("state")
        state = cast("dict[str, Any]", state) if isinstance(state, dict) else {}
        call_id = part.get("callID")
        call = normalise_tool_call(
            {"id": call_id, "name": part.get("tool"), "arguments": state.get("input")}
        )
        self.calls.append(call)
        self.blocks.append(
            {"type": "tool_call", "id": call_id, "name": call["name"], "input": call["arguments"]}
        )
        output = state.get("output", state.get("error"))
        if isinstance(call_id, str) and output is not None:
            self.results.append(
                {"role": "tool", "tool_call_id": call_id, "name": call["name"],
                 "content": output if isinstance(output, str) else str(output)}
            )  # fmt: skip

    def _answer(self, model: str | None, usage: RecordedUsage | None) -> None:
        if not self.blocks:
            return
        message: dict[str, Any] = {"role": "assistant", "content": self.blocks}
        if self.calls:
            message["tool_calls"] = self.calls
        self.log.answer(message, model, usage)
        for result in self.results:
            self.log.add(result)
        if usage is not None:
            self.last_size = usage.occupancy
        self.blocks, self.calls, self.results = [], [], []


def _parts(parts: list[Any]) -> list[dict[str, Any]]:
    return [cast("dict[str, Any]", p) for p in parts if isinstance(p, dict)]


def _usage(tokens: object) -> RecordedUsage | None:
    if not isinstance(tokens, dict):
        return None
    tokens = cast("dict[str, Any]", tokens)
    cache = tokens.get("cache")
    cache = cast("dict[str, Any]", cache) if isinstance(cache, dict) else {}
    return host_usage(
        tokens.get("input"), cache.get("read"), cache.get("write"), tokens.get("output")
    )


def _stamp(info: dict[str, Any]) -> str | None:
    time = info.get("time")
    if isinstance(time, dict):
        created = cast("dict[str, Any]", time).get("created")
        return str(created) if isinstance(created, int) else None
    return None
