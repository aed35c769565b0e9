"""Reading Claude Code's own session logs (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is one event. ``user`` and ``assistant`` events carry a ``message`` in the Anthropic
Messages shape; every other ``type`` (``summary``, ``system``, ``file-history-snapshot``, ...)
is bookkeeping of Claude Code's and is counted, not replayed. Events with ``isSidechain`` are a
sub-agent's turns, sent in another conversation: they are left out and counted too.

The messages come out in the shape an Amplifier orchestrator stores, so the replay sees what
it would see from an Amplifier transcript of the same conversation:

* an assistant message keeps its content blocks, with each ``tool_use`` block written as the
  stored ``tool_call`` block (``id``, ``name``, ``input``) and its call repeated in
  ``tool_calls`` as ``{"id", "tool", "name", "arguments"}`` (what the provider modules read);
* a user event's ``tool_result`` blocks become one ``role: tool`` message each, and whatever
  else that event held follows them as a user message (the order the API requires: results
  first);
* Claude Code writes one assistant event per content block of one API response, all with the
  same ``message.id``; they are one assistant message here. A tool result that arrives while
  the response is still being written (Claude Code runs tools as their blocks stream) does not
  split it: later blocks of the same response still join that message.

Usage: each API response is one provider request, its usage counted once (the last event's:
streaming fills ``output_tokens`` in as it goes, the input figures are the same on each). It is
rewritten to the host's usage contract (``input_tokens`` gross, cache reads included;
``cache_read_tokens``, ``cache_write_tokens``), which the replay's meter and reports read. An
assistant message whose model is ``<synthetic>`` (Claude Code's own notice, an API error say)
had no request behind it: it is kept, without usage.

The log records no system prompt and no tool definitions. What it records of each request's
messages is rebuilt (:meth:`LoadedLog.requests`) for the cache report, which follows where one
request stops extending the last; the window figures stay the replayed views'.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from .recorded_log import LoadedLog, LogCompaction, Response, count
from .session_dir import RecordedUsage
from .transcripts import TOO_DEEP, LineError, TranscriptError, normalise_tool_call

__all__ = [
    "COMPACTION_MARK",
    "FORMAT",
    "NOT_A_CLAUDE_CODE_LOG",
    "LoadedLog",
    "content_blocks",
    "is_claude_code_log",
    "load_claude_code_log",
    "looks_like_claude_code_log",
    "parse_claude_code_log",
    "result_content",
    "stored_block",
    "tool_message",
    "tool_use_call",
]

FORMAT = "claude-code"
COMPACT_BOUNDARY = "compact_boundary"
COMPACTION_MARK = f"{FORMAT} {COMPACT_BOUNDARY}"
"""What marks Claude Code's own compactions, as the report names it."""
SYNTHETIC_MODEL = "<synthetic>"
_MESSAGE_TYPES = frozenset({"user", "assistant"})
_EVENT_KEYS = frozenset({"sessionId", "uuid", "parentUuid", "leafUuid", "isSidechain"})
_SNIFF_LINES = 50
NOT_A_CLAUDE_CODE_LOG = (
    f"Claude Code log: none of its first {_SNIFF_LINES} lines is an event (a 'type' beside "
    "'sessionId' or 'uuid', or a 'message' object), or a line has a 'role'"
)
"""Why a file is not read as a Claude Code log, for the error that lists every format tried."""


def is_claude_code_log(path: Path) -> bool:
    """Whether the file at ``path`` reads as a Claude Code log (see
    :func:`looks_like_claude_code_log`)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as stream:
            return looks_like_claude_code_log(stream)
    except OSError:
        return False


def looks_like_claude_code_log(lines: Iterable[bytes | str]) -> bool:
    """Whether ``lines`` read as a Claude Code log: among the first that are JSON objects,
    none has a ``role`` (every message format the tool reads has one on each line) and one has
    a string ``type`` beside Claude Code's event keys (``sessionId``, ``uuid``, ...) or a
    ``message`` object. Only those first lines are read."""
    seen = 0
    found = False
    for line in lines:
        value = _object(line)
        if value is None:
            continue
        if "role" in value:
            return False
        if isinstance(value.get("type"), str) and (
            _EVENT_KEYS & value.keys() or isinstance(value.get("message"), dict)
        ):
            found = True
        seen += 1
        if seen >= _SNIFF_LINES:
            break
    return found


def _object(line: bytes | str) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def load_claude_code_log(path: str | Path, *, strict: bool = False) -> LoadedLog:
    """Load a Claude Code session log from a file (see the module docstring).

    A line that cannot be used (not JSON, not an object, a message event without a usable
    ``message``, a ``tool_result`` answering no earlier call) is listed in ``skipped`` with
    its number, and the rest is loaded; with ``strict=True`` the first raises
    :class:`~.transcripts.TranscriptError` naming it.
    """
    path = Path(path).expanduser()
    try:
        with path.open("rb") as stream:
            return _load(stream, str(path), strict=strict)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from exc


def parse_claude_code_log(
    text: str, *, label: str = "standard input", strict: bool = False
) -> LoadedLog:
    """:func:`load_claude_code_log` for a log already read (standard input); ``label`` names
    it in errors."""
    # Split on "\n" only: JSON strings may hold U+2028 and friends unescaped.
    return _load(text.split("\n"), label, strict=strict)


def _load(lines: Iterable[bytes | str], label: str, *, strict: bool) -> LoadedLog:
    reader = _Reader()
    for number, line in enumerate(lines, 1):
        reason = reader.line(line)
        if reason:
            if strict:
                raise TranscriptError(f"{label}: line {number}: {reason}")
            reader.skipped.append(LineError(number, reason))
    if not reader.messages:
        raise TranscriptError(
            f"{label} has no user or assistant message of the main conversation "
            f"({reader.summary()})"
        )
    return LoadedLog(
        messages=reader.messages,
        skipped=reader.skipped,
        notes=reader.notes(),
        model=reader.models[0] if reader.models else None,
        request_count=sum(r.counted for r in reader.responses),
        _responses=reader.responses,
        _wire=reader.wire,
        format=FORMAT,
        compactions=reader.compactions,
        compaction_mark=COMPACTION_MARK,
        segment_starts=reader.segment_starts,
        _sub_agent_responses=reader.side_responses,
        _sub_agent_wire=reader.side_wire,
    )


class _Reader:
    """The state of one pass over a log: the messages so far and what was set aside."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.wire: list[dict[str, Any]] = []  # the Anthropic messages, as sent
        self.responses: list[Response] = []
        self.compactions: list[LogCompaction] = []
        self.skipped: list[LineError] = []
        self.counted: set[str] = set()  # ids of the responses counted so far
        self.calls: dict[str, str] = {}  # tool_use id -> tool name, of earlier calls
        self.other_types: Counter[str] = Counter()
        self.sidechain = 0
        self.synthetic = 0
        self.models: list[str] = []
        self.segment = 0  # where the current request chain starts in ``wire``
        self.segment_starts: list[int] = []  # where each chain starts in ``messages``
        self._open: dict[str, Any] | None = None  # the assistant message still being written
        self._open_id: str | None = None
        self._wire_at = 0  # the open assistant message's place in ``wire``
        self.side_wire: list[dict[str, Any]] = []  # the sub-agents' messages, as sent
        self.side_responses: list[Response] = []
        self._side_open: str | None = None

    def line(self, raw: bytes | str) -> str:
        """Take one line; return why it is unusable ("" when it was taken or skipped quietly)."""
        if not raw.strip():
            return ""
        try:
            value = json.loads(raw)
        except UnicodeDecodeError:
            return "not valid UTF-8"
        except RecursionError:
            return TOO_DEEP
        except ValueError as exc:
            return f"invalid JSON: {getattr(exc, 'msg', exc)}"
        if not isinstance(value, dict):
            return f"expected a JSON event object, got {type(value).__name__}"
        event: dict[str, Any] = value
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == COMPACT_BOUNDARY:
            self._compaction(event)
        if not isinstance(kind, str) or kind not in _MESSAGE_TYPES:
            self.other_types[str(kind) if isinstance(kind, str) else "(no type)"] += 1
            return ""
        if event.get("isSidechain") is True:
            self.sidechain += 1
            self._sub_agent(event)
            return ""
        message = event.get("message")
        if not isinstance(message, dict):
            article = "an" if kind == "assistant" else "a"
            return f"{article} {kind} event without a 'message' object"
        content = message.get("content")
        if kind == "assistant":
            return self._assistant(event, message, content)
        return self._user(event, content)

    def _compaction(self, event: dict[str, Any]) -> None:
        meta = event.get("compactMetadata")
        meta = cast("dict[str, Any]", meta) if isinstance(meta, dict) else {}
        trigger = meta.get("trigger")
        stamp = event.get("timestamp")
        self.compactions.append(
            LogCompaction(
                len(self.responses),
                trigger if isinstance(trigger, str) else None,
                count(meta.get("preTokens")),
                stamp if isinstance(stamp, str) else None,
            )
        )

    def _sub_agent(self, event: dict[str, Any]) -> None:
        """A sub-agent's event: its own conversation, kept for its requests' usage only."""
        message = event.get("message")
        if not isinstance(message, dict):
            return
        message = cast("dict[str, Any]", message)
        blocks = content_blocks(message.get("content")) or []
        if event.get("type") == "user":
            self.side_wire.append({"role": "user", "content": blocks})
            return
        response_id = message.get("id") if isinstance(message.get("id"), str) else None
        usage = message.get("usage")
        recorded = _anthropic_usage(usage) if isinstance(usage, dict) else None
        if response_id is not None and response_id == self._side_open:
            self.side_wire[-1]["content"].extend(blocks)
            last = self.side_responses[-1]
            if recorded is not None:
                self.side_responses[-1] = replace(last, usage=recorded)
            return
        model = message.get("model") if isinstance(message.get("model"), str) else None
        if model == SYNTHETIC_MODEL:
            return
        self.side_responses.append(Response(model, recorded, 0, len(self.side_wire), True))
        self.side_wire.append({"role": "assistant", "content": blocks})
        self._side_open = response_id

    # --- assistant ---------------------------------------------------------------------

    def _assistant(self, event: dict[str, Any], message: dict[str, Any], content: object) -> str:
        blocks = content_blocks(content)
        if blocks is None:
            return "assistant 'content' is neither text nor a list of blocks"
        # A call with no id can be answered by no result: the host refuses it in any view.
        unpaired = [b for b in blocks if b.get("type") == "tool_use" and not _has_id(b)]
        blocks = [b for b in blocks if not any(b is u for u in unpaired)]
        response_id = message.get("id") if isinstance(message.get("id"), str) else None
        model = message.get("model") if isinstance(message.get("model"), str) else None
        usage = message.get("usage")
        stamp = _stamp(event)
        per_block = [tool_use_call(b) if b.get("type") == "tool_use" else None for b in blocks]
        stored = [stored_block(b, c) for b, c in zip(blocks, per_block, strict=True)]
        calls = [c for c in per_block if c is not None]
        for call in calls:
            if isinstance(call["id"], str):
                self.calls[call["id"]] = call["tool"]
        if self._open is not None and response_id is not None and response_id == self._open_id:
            # Another block of the response being written: it joins that message.
            self._open["content"].extend(stored)
            if calls:
                self._open.setdefault("tool_calls", []).extend(calls)
            self.wire[self._wire_at]["content"].extend(blocks)
            last = self.responses[-1]
            if last.counted and isinstance(usage, dict):
                self.responses[-1] = replace(last, usage=_anthropic_usage(usage))
            return _unpaired_text(unpaired)
        stored_message: dict[str, Any] = {"role": "assistant", "content": stored, **stamp}
        if calls:
            stored_message["tool_calls"] = calls
        self.messages.append(stored_message)
        synthetic = model == SYNTHETIC_MODEL
        counted = not synthetic and response_id not in self.counted
        if synthetic:
            self.synthetic += 1
        elif response_id is not None:
            self.counted.add(response_id)
        if model and not synthetic and model not in self.models:
            self.models.append(model)
        # A real response without usage is still a request: counted, its figures unknown.
        recorded = _anthropic_usage(usage) if counted and isinstance(usage, dict) else None
        self.responses.append(Response(model, recorded, self.segment, len(self.wire), counted))
        self._wire_at = len(self.wire)
        self.wire.append({"role": "assistant", "content": list(blocks)})
        self._open, self._open_id = stored_message, response_id
        return _unpaired_text(unpaired)

    # --- user ----------------------------------------------------------------------------

    def _user(self, event: dict[str, Any], content: object) -> str:
        blocks = content_blocks(content)
        if blocks is None:
            return "user 'content' is neither text nor a list of blocks"
        results = [b for b in blocks if b.get("type") == "tool_result"]
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        answered = [r for r in results if self._answers(r)]
        orphans = [r.get("tool_use_id") for r in results if not self._answers(r)]
        stamp = _stamp(event)
        for result in answered:
            tool = self.calls[result["tool_use_id"]]
            self.messages.append(tool_message(result, tool, stamp))
        if event.get("isCompactSummary") is True:
            self.segment_starts.append(len(self.messages))
        if rest:
            self._open = None  # a person spoke: the next assistant event is a new response
            text = content if isinstance(content, str) else rest
            self.messages.append({"role": "user", "content": text, **stamp})
        if event.get("isCompactSummary") is True:
            # Claude Code sends only the summary onwards after a compaction.
            self.segment = len(self.wire)
        self._wire_user([*answered, *rest])
        if orphans:
            # Kept, a result no call asked for would make every view from here on invalid.
            return (
                f"a tool_result for {', '.join(map(repr, orphans))}, which no earlier tool_use "
                "has: that result is left out (the rest of the line is kept)"
            )
        return ""

    def _answers(self, result: dict[str, Any]) -> bool:
        call_id = result.get("tool_use_id")
        return isinstance(call_id, str) and call_id in self.calls

    def _wire_user(self, blocks: list[dict[str, Any]]) -> None:
        # The API merges consecutive user turns (parallel results arrive one event each).
        last = self.wire[-1] if self.wire and self.wire[-1]["role"] == "user" else None
        if last is not None and len(self.wire) > self.segment:
            last["content"].extend(blocks)
        else:
            self.wire.append({"role": "user", "content": list(blocks)})

    def summary(self) -> str:
        parts = [f"{len(self.skipped)} line(s) unusable"] if self.skipped else []
        if self.sidechain:
            parts.append(f"{self.sidechain} sub-agent event(s) left out")
        parts += [f"{n} {kind}" for kind, n in self.other_types.most_common()]
        return ", ".join(parts) or "no event"

    def notes(self) -> list[str]:
        notes = [
            "a Claude Code log records no system prompt and no tool definitions: only its "
            "usage is fed to the replay, and the window figures are the replayed views'"
        ]
        if self.other_types:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.other_types.most_common())
            notes.append(f"events that are not messages, skipped: {kinds}")
        if self.sidechain:
            notes.append(
                f"{self.sidechain} sub-agent (sidechain) event(s) left out: another conversation"
            )
        if self.synthetic:
            notes.append(
                f"{self.synthetic} synthetic assistant message(s) (model {SYNTHETIC_MODEL}: "
                "Claude Code's own notice) kept, with no request usage counted for them"
            )
        if len(self.models) > 1:
            notes.append(f"the session used {len(self.models)} models: {', '.join(self.models)}")
        return notes


def content_blocks(content: object) -> list[dict[str, Any]] | None:
    """Content as blocks (a string is one text block); None when it is neither."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return None
    blocks: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return None
        blocks.append(block)
    return blocks


def _has_id(block: dict[str, Any]) -> bool:
    return isinstance(block.get("id"), str) and bool(block["id"])


def _unpaired_text(unpaired: list[dict[str, Any]]) -> str:
    if not unpaired:
        return ""
    return (
        f"{len(unpaired)} tool_use block(s) without a string 'id' left out (no result can "
        "answer them); the rest of the line is kept"
    )


def stored_block(block: dict[str, Any], call: dict[str, Any] | None) -> dict[str, Any]:
    """A content block as an Amplifier transcript stores it: a call as a ``tool_call``."""
    if call is None:
        return dict(block)
    return {"type": "tool_call", "id": call["id"], "name": call["name"], "input": call["arguments"]}


def tool_use_call(block: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as a stored ``tool_calls`` entry (arguments that are no object are
    kept as their JSON text, as for any foreign call)."""
    return normalise_tool_call(
        {"id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    )


def tool_message(result: dict[str, Any], tool: str, stamp: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": result["tool_use_id"],
        "name": tool,
        "content": result_content(result.get("content")),
    }
    metadata = dict(stamp.get("metadata", {}))
    if result.get("is_error") is True:
        # The provider modules send no such flag back; kept so a reader of the view still
        # sees the call failed.
        metadata["is_error"] = True
    if metadata:
        message["metadata"] = metadata
    return message


def result_content(content: object) -> str | list[Any]:
    """A result's content as a message holds it: text or blocks as logged (images included),
    anything else as its JSON text, so no result is refused or lost."""
    if content is None:
        return ""
    if isinstance(content, str | list):
        return cast("str | list[Any]", content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _stamp(event: dict[str, Any]) -> dict[str, Any]:
    """The event's time as an Amplifier transcript's message keeps it (``metadata``)."""
    stamp = event.get("timestamp")
    return {"metadata": {"timestamp": stamp}} if isinstance(stamp, str) else {}


def _anthropic_usage(usage: dict[str, Any]) -> RecordedUsage:
    """Anthropic's usage (``input_tokens`` without the cache) in the host's terms."""
    fresh = count(usage.get("input_tokens"))
    read = count(usage.get("cache_read_input_tokens")) or 0
    written = count(usage.get("cache_creation_input_tokens")) or 0
    host: dict[str, Any] = {
        "input_tokens": None if fresh is None else fresh + read,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "output_tokens": count(usage.get("output_tokens")),
    }
    return RecordedUsage.from_mapping({k: v for k, v in host.items() if v is not None})
