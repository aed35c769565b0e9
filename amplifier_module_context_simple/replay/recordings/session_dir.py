"""Reading an Amplifier session directory: the transcript, the metadata and the events log.

A session directory holds ``transcript.jsonl`` and ``metadata.json``, and wherever a hook
bundle wrote one, an ``events.jsonl`` (at the top level or in the hook's own subfolder such as
``context-intelligence/``). Each events line is ``{"ts", "lvl", "schema", "event",
"session_id", "data"}``. From it come:

* ``session:config``: the context module and its config, the provider module and its config;
* ``llm:request``: the raw provider payload of every request (``data["raw"]``: ``system``,
  ``tools``, ``messages``, ``max_tokens`` ...) and the model;
* ``llm:response``: the usage the provider reported for the request before it;
* ``context:budget``: the budget the context module derived, when it emitted one.

A request payload can be hundreds of kilobytes, so the file is streamed line by line and never
read whole. :func:`read_session` keeps only the small facts; :meth:`RecordedSession.requests`
streams the payloads again, one alive at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .transcripts import TRANSCRIPT_NAME, LineError

__all__ = [
    "EVENTS_NAME",
    "SESSIONS_GLOB",
    "RecordedRequest",
    "RecordedSession",
    "RecordedUsage",
    "SessionError",
    "find_session",
    "read_events",
    "read_session",
    "system_text",
]

METADATA_NAME = "metadata.json"
EVENTS_NAME = "events.jsonl"
SESSIONS_GLOB = ".amplifier/projects/*/sessions"
"""Where app-cli keeps sessions, under the home directory."""

_REQUEST = "llm:request"
_RESPONSE = "llm:response"
_CONFIG = "session:config"
_START = "session:start"
_RESUME = "session:resume"
_BUDGET = "context:budget"


class SessionError(Exception):
    """A session that cannot be found or read as asked; the message is one line."""


@dataclass(frozen=True)
class RecordedUsage:
    """One ``llm:response`` usage, as the host recorded it."""

    input_tokens: int | None
    """Gross input: under the host's usage contract it already includes the cache reads."""
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int | None
    raw: dict[str, Any]
    """The usage mapping as recorded (handed to the meter unchanged)."""

    @property
    def occupancy(self) -> int | None:
        """What the request held in the window: gross input plus cache writes (billed apart)."""
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_write_tokens or 0)

    @classmethod
    def from_mapping(cls, usage: Mapping[str, Any]) -> RecordedUsage:
        return cls(
            input_tokens=_count(usage.get("input_tokens")),
            cache_read_tokens=_count(usage.get("cache_read_tokens")),
            cache_write_tokens=_count(usage.get("cache_write_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
            raw=dict(usage),
        )


@dataclass(frozen=True)
class RecordedRequest:
    """One recorded ``llm:request``, with the usage of the response that followed it."""

    number: int
    """1-based, in event order."""
    model: str | None
    payload: dict[str, Any]
    """The ``llm:request`` ``data["raw"]``: ``system``, ``tools``, ``messages``, ``max_tokens``."""
    usage: RecordedUsage | None
    messages_only: bool = False
    """The payload holds only the messages, rebuilt from a log that records no system prompt
    and no tool definitions (a Claude Code log): the window figures are then the replayed
    view's, and only the cache report reads the payload."""


@dataclass(frozen=True)
class RecordedSession:
    """What a session directory recorded, without the request payloads (see :meth:`requests`)."""

    directory: Path
    transcript: Path
    metadata: dict[str, Any]
    """The top-level ``metadata.json`` (``{}`` when absent or unreadable)."""
    events: Path | None
    """The ``events.jsonl`` read: at the top level or one subfolder down; ``None``: none."""
    context_module: str | None
    context_config: dict[str, Any]
    """``session:config``'s ``session.context.config``."""
    provider_module: str | None
    provider_config: dict[str, Any]
    model: str | None
    """From the requests or responses, else the provider's ``default_model``, else metadata."""
    budget_event: dict[str, Any] | None
    """A recorded ``context:budget`` event's data (the first with a window, else the first)."""
    usages: list[RecordedUsage | None]
    """One per ``llm:request``, in order: the usage of the response that followed it."""
    request_count: int
    max_output_tokens: int | None = None
    """The first request payload's ``max_tokens``: the output the session asked for."""
    skipped: list[LineError] = field(default_factory=list[LineError])
    """Events lines that could not be used (not JSON, not an event object)."""
    notes: list[str] = field(default_factory=list[str])
    """What a reader should know: which events file was picked, an unreadable metadata file,
    an ``events.jsonl`` that is not a file, a file cut off inside its last record."""
    cut_off_line: int | None = None
    """The events file ends inside this line (no newline after it, not a whole event): what a
    crashed or still-running session leaves; ``None``: it ends on a whole line."""
    resumes: int = 0
    """How often the session was resumed (``session:resume`` events, and ``session:start``
    after the first): each is a new process reading the history back."""

    def requests(self) -> Iterator[RecordedRequest]:
        """The recorded requests in order, streamed again from the events file."""
        if self.events is None:
            return
        number = 0
        for _, event in read_events(self.events, skipped=None):
            if event.get("event") != _REQUEST:
                continue
            number += 1
            data: dict[str, Any] = event["data"]
            raw = data.get("raw")
            payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
            usage = self.usages[number - 1] if number <= len(self.usages) else None
            yield RecordedRequest(number, _request_model(data), payload, usage)


def find_session(source: str) -> Path | None:
    """The session directory ``source`` names, or ``None`` when it names none.

    ``source`` is a directory containing ``transcript.jsonl``, or a session id (or the start
    of one) looked up under ``$HOME/.amplifier/projects/*/sessions/``. An id that matches more
    than one session raises :class:`SessionError` naming them.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        return path if (path / TRANSCRIPT_NAME).is_file() else None
    if path.exists() or not source or "/" in source or source in {".", ".."}:
        return None
    found = _sessions_named(source)
    if len(found) > 1:
        names = ", ".join(str(p) for p in found[:5]) + (" ..." if len(found) > 5 else "")
        raise SessionError(
            f"session id {source!r} is ambiguous: {len(found)} sessions match: {names}"
        )
    return found[0] if found else None


def _sessions_named(session_id: str) -> list[Path]:
    root = Path.home()
    candidates = [p for p in sorted(root.glob(SESSIONS_GLOB + "/*")) if p.is_dir()]
    exact = [p for p in candidates if p.name == session_id]
    # An exact id wins over longer ids it happens to begin; otherwise a prefix, as people
    # copy the first characters of an id.
    matches = exact or [p for p in candidates if p.name.startswith(session_id)]
    return [p for p in matches if (p / TRANSCRIPT_NAME).is_file()]


def read_session(directory: str | Path, *, strict: bool = False) -> RecordedSession:
    """Read the small facts of a session directory in one pass over its events file.

    Unusable events lines are skipped and listed in ``skipped``; with ``strict=True`` the first
    one raises :class:`SessionError` naming its line number.
    """
    directory = Path(directory)
    transcript = directory / TRANSCRIPT_NAME
    if not transcript.is_file():
        raise SessionError(f"{directory} is not a session directory (no {TRANSCRIPT_NAME})")
    notes: list[str] = []
    metadata = _metadata(directory / METADATA_NAME, notes)
    candidates = _events_files(directory, notes)
    scans = [_scan(path) for path in candidates]
    chosen = next((s for s in scans if s.request_count), scans[0] if scans else None)
    if strict and chosen is not None and chosen.skipped:
        # Strict about the file that is replayed; another hook's log is not read.
        raise SessionError(f"{chosen.path}: {chosen.skipped[0]}")
    if chosen is not None and len(scans) > 1:
        others = ", ".join(str(s.path.relative_to(directory)) for s in scans if s is not chosen)
        why = "the one with llm:request events" if chosen.request_count else "the first found"
        notes.append(f"read {chosen.path.relative_to(directory)} ({why}); also found {others}")
    scan = chosen or _Scan(directory / EVENTS_NAME)
    if scan.cut_off_line is not None:
        notes.append(
            f"{scan.path.relative_to(directory)} ends inside line {scan.cut_off_line:,} (cut off "
            "mid-record: a crashed or still-running session); the report is partial"
        )
    model = scan.model or _text(scan.provider_config.get("default_model"))
    model = model or _text(metadata.get("model"))
    return RecordedSession(
        directory=directory,
        transcript=transcript,
        metadata=metadata,
        events=scan.path if chosen is not None else None,
        context_module=scan.context_module,
        context_config=scan.context_config,
        provider_module=scan.provider_module,
        provider_config=scan.provider_config,
        model=model,
        budget_event=scan.budget_event,
        usages=scan.usages,
        request_count=scan.request_count,
        max_output_tokens=scan.max_output_tokens,
        skipped=scan.skipped,
        notes=notes,
        cut_off_line=scan.cut_off_line,
        resumes=scan.resumes,
    )


def system_text(payload: Mapping[str, Any]) -> str | None:
    """A request payload's system prompt as one text: its text blocks joined, or the string."""
    system = payload.get("system")
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        return None
    texts = [b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n\n".join(texts) if texts else None


# --- the one pass --------------------------------------------------------------------------


@dataclass
class _Scan:
    path: Path
    context_module: str | None = None
    context_config: dict[str, Any] = field(default_factory=dict[str, Any])
    provider_module: str | None = None
    provider_config: dict[str, Any] = field(default_factory=dict[str, Any])
    model: str | None = None
    budget_event: dict[str, Any] | None = None
    usages: list[RecordedUsage | None] = field(default_factory=list[RecordedUsage | None])
    request_count: int = 0
    max_output_tokens: int | None = None
    skipped: list[LineError] = field(default_factory=list[LineError])
    answered: bool = True
    providers: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    request_provider: str | None = None
    cut_off_line: int | None = None
    starts: int = 0
    resumes: int = 0


def _scan(path: Path) -> _Scan:
    scan = _Scan(path)
    for _, event in read_events(path, skipped=scan.skipped):
        name, data = event["event"], event["data"]
        if name == _REQUEST:
            scan.request_count += 1
            scan.usages.append(None)
            scan.answered = False
            scan.model = scan.model or _request_model(data)
            scan.request_provider = scan.request_provider or _text(data.get("provider"))
            raw = data.get("raw")
            if scan.max_output_tokens is None and isinstance(raw, dict):
                scan.max_output_tokens = _count(raw.get("max_tokens"))
        elif name == _RESPONSE:
            scan.model = scan.model or _text(data.get("model"))
            usage = data.get("usage")
            if usage is None and "input_tokens" in data:
                usage = data  # recorded at the event's top level, not under "usage"
            # Only the first response after a request answers it (a retry's is not new).
            if not scan.answered and isinstance(usage, dict):
                scan.usages[-1] = RecordedUsage.from_mapping(usage)
                scan.answered = True
        elif name == _CONFIG:
            _read_config(scan, data)
        elif name == _RESUME:
            scan.resumes += 1
        elif name == _START:
            scan.starts += 1
            scan.resumes += scan.starts > 1
        elif name == _BUDGET and _better_budget(scan.budget_event, data):
            scan.budget_event = dict(data)
    _pick_provider(scan)
    scan.cut_off_line = _cut_off_line(path, scan.skipped)
    return scan


def _cut_off_line(path: Path, skipped: list[LineError]) -> int | None:
    """The last line's number when it was skipped and no newline ends the file."""
    if not skipped:
        return None
    with path.open("rb") as stream:
        stream.seek(0, 2)
        if stream.tell() == 0:
            return None
        stream.seek(-1, 2)
        if stream.read(1) == b"\n":
            return None
        stream.seek(0)
        lines = sum(1 for _ in stream)
    last = skipped[-1].line_number
    return last if last == lines else None


def _better_budget(current: dict[str, Any] | None, data: dict[str, Any]) -> bool:
    """Keep the first budget event, or the first one that names a window."""
    if current is None:
        return True
    return "context_window" not in current and "context_window" in data


def _read_config(scan: _Scan, data: dict[str, Any]) -> None:
    raw = _mapping(data.get("raw")) or data
    context = _mapping(_mapping(raw.get("session")).get("context"))
    scan.context_module = _text(context.get("module"))
    scan.context_config = dict(_mapping(context.get("config")))
    providers: Any = raw.get("providers")
    if isinstance(providers, list):
        scan.providers = [p for p in providers if isinstance(p, dict)]


def _pick_provider(scan: _Scan) -> None:
    """The provider the requests went to (``llm:request`` names it), else the first listed."""
    if not scan.providers:
        return
    wanted = scan.request_provider
    chosen = next(
        (p for p in scan.providers if wanted and str(p.get("module", "")).endswith(wanted)),
        scan.providers[0],
    )
    scan.provider_module = _text(chosen.get("module"))
    scan.provider_config = dict(_mapping(chosen.get("config")))


def read_events(
    path: Path, *, skipped: list[LineError] | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, event)`` for each usable line, read one line at a time."""
    with path.open("rb") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            event, reason = _parse(line)
            if event is not None:
                yield number, event
            elif skipped is not None:
                skipped.append(LineError(number, reason))


def _parse(line: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        value = json.loads(line)
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"invalid JSON: {getattr(exc, 'msg', exc)}"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    event: dict[str, Any] = value
    if not isinstance(event.get("event"), str):
        return None, "no 'event' name"
    if not isinstance(event.get("data"), dict):
        return None, "'data' is not an object"
    return event, ""


def _metadata(path: Path, notes: list[str]) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        notes.append(f"{path.name} is unreadable ({type(exc).__name__}); ignored")
        return {}
    if not isinstance(value, dict):
        notes.append(f"{path.name} is not a JSON object; ignored")
        return {}
    return value


def _events_files(directory: Path, notes: list[str]) -> list[Path]:
    """The top-level ``events.jsonl`` first, then those one subfolder down, by name.

    One that exists but is not a file (a directory) is named in ``notes`` and not read.
    """
    found = [directory / EVENTS_NAME, *sorted(directory.glob(f"*/{EVENTS_NAME}"))]
    for path in found:
        if path.exists() and not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            notes.append(f"{path.relative_to(directory)} is {kind}, not an events file: ignored")
    return [p for p in found if p.is_file()]


def _request_model(data: Mapping[str, Any]) -> str | None:
    raw = _mapping(data.get("raw"))
    return _text(data.get("model")) or _text(raw.get("model"))


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    """A token count as recorded: a non-negative int (an integral float too), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None
