"""What every agent's own log is read into: the stored messages and the requests it records.

A coding agent's log (Claude Code, Codex, Cline, OpenCode, Pi) records a conversation and, for
each call the agent made to its provider, the model and the usage. Each reader turns its
format into a :class:`LoadedLog`, through a :class:`LogBuilder`: the messages in the shape an
Amplifier orchestrator stores, one :class:`_Response` per assistant message (the request that
produced it), and the messages the log shows each request sent (``wire``), which the cache
report follows. When the agent compacted its own history, the requests after it send from its
summary on (:meth:`LogBuilder.compacted`), and the compaction is kept as a
:class:`LogCompaction`. Where in the stored messages that summary begins is a segment start
(:attr:`LoadedLog.segment_starts`): the replay starts its history afresh there, so each request
it makes sends what the agent's did, the whole of its segment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

from .session_dir import RecordedRequest, RecordedUsage
from .transcripts import TOO_DEEP, LineError

__all__ = [
    "LoadedLog",
    "LogBuilder",
    "LogCompaction",
    "Response",
    "count",
    "host_usage",
    "json_objects",
    "parse_json",
]


@dataclass(frozen=True)
class Response:
    """One assistant message of the log and the request that produced it."""

    model: str | None
    usage: RecordedUsage | None
    start: int
    """Where the request's messages begin in the wire list (after a compaction: at its
    summary, the first message the agent sends from then on)."""
    end: int
    counted: bool
    """A real response seen for the first time: its usage is one request's."""


@dataclass(frozen=True)
class LogCompaction:
    """One compaction of the agent's own, as its log records it."""

    after_request: int
    """The number of requests made before it (0: before the first)."""
    trigger: str | None
    """What set it off, in the agent's words (``manual``, ``auto``), when it says."""
    tokens_before: int | None
    """The context's size just before it, when the log says."""
    timestamp: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "after_request": self.after_request,
            "trigger": self.trigger,
            "tokens_before": self.tokens_before,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class LoadedLog:
    """An agent's log as stored messages, with one entry per assistant message."""

    messages: list[dict[str, Any]]
    skipped: list[LineError]
    notes: list[str]
    model: str | None
    """The first real model the log names."""
    request_count: int
    """Distinct real responses: the provider requests the session made."""
    _responses: list[Response] = field(repr=False)
    _wire: list[dict[str, Any]] = field(repr=False)
    format: str = "claude-code"
    context_window: int | None = None
    """The window the log records for its model (Codex's ``model_context_window``)."""
    compactions: list[LogCompaction] = field(default_factory=list[LogCompaction])
    compaction_mark: str = ""
    """What marks the agent's own compactions in this format, as the report names it."""
    _sub_agent_responses: list[Response] = field(default_factory=list[Response], repr=False)
    _sub_agent_wire: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]], repr=False)
    segment_starts: list[int] = field(default_factory=list[int])
    """Where, in ``messages``, the agent's history started afresh after its own compaction
    (its summary, or what came next when it kept none): each request after it sent from there
    on, and the replay starts its manager's history there too."""

    def requests(self) -> Iterator[RecordedRequest]:
        """One recorded request per assistant message, in order: its model, its usage (None
        for a message with no request behind it, or a later part of a response already
        counted) and the messages the log shows it sent (no system prompt, no tools:
        ``messages_only``). Each sent the whole of its segment (see :attr:`segment_starts`),
        which is the whole history of a replay that starts afresh at each segment."""
        return _requests(self._responses, self._wire)

    def sub_agent_requests(self) -> Iterator[RecordedRequest]:
        """The requests the agent's sub-agents made (Claude Code's sidechain), numbered among
        themselves: another conversation, which the replay does not replay but whose usage
        the session paid for."""
        return _requests(self._sub_agent_responses, self._sub_agent_wire)


def _requests(responses: list[Response], wire: list[dict[str, Any]]) -> Iterator[RecordedRequest]:
    for number, r in enumerate(responses, 1):
        payload = {"messages": wire[r.start : r.end]}
        yield RecordedRequest(number, r.model, payload, r.usage, messages_only=True)


class LogBuilder:
    """A log being read: stored messages in order, each assistant one a request's answer.

    The wire list is the stored messages themselves (the readers other than Claude Code's have
    no separate wire shape): a request sent what came before its answer, from the latest
    compaction's summary on.
    """

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.responses: list[Response] = []
        self.compactions: list[LogCompaction] = []
        self.skipped: list[LineError] = []
        self.models: list[str] = []
        self.segment = 0
        self.segment_starts: list[int] = []

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def answer(
        self, message: dict[str, Any], model: str | None, usage: RecordedUsage | None
    ) -> None:
        """An assistant message and the request that produced it (``usage`` None: unknown)."""
        if model and model not in self.models:
            self.models.append(model)
        self.responses.append(Response(model, usage, self.segment, len(self.messages), True))
        self.messages.append(message)

    def usage_of_last(self, usage: RecordedUsage | None) -> bool:
        """Give the latest answer the usage recorded after it; False when it already has one
        (or there is none)."""
        if not self.responses or self.responses[-1].usage is not None:
            return False
        self.responses[-1] = replace(self.responses[-1], usage=usage)
        return True

    def compacted(
        self, trigger: str | None, tokens_before: int | None, timestamp: str | None
    ) -> None:
        """The agent compacted here: what it adds next (its summary) starts every later
        request."""
        self.compactions.append(
            LogCompaction(len(self.responses), trigger, tokens_before, timestamp)
        )
        self.segment = len(self.messages)
        self.segment_starts.append(self.segment)

    def build(
        self,
        *,
        format: str,
        notes: list[str],
        compaction_mark: str,
        context_window: int | None = None,
    ) -> LoadedLog:
        return LoadedLog(
            messages=self.messages,
            skipped=self.skipped,
            notes=notes,
            model=self.models[0] if self.models else None,
            request_count=len(self.responses),
            _responses=self.responses,
            _wire=self.messages,
            format=format,
            context_window=context_window,
            compactions=self.compactions,
            compaction_mark=compaction_mark,
            segment_starts=self.segment_starts,
        )


def host_usage(
    fresh: object, read: object, written: object, output: object
) -> RecordedUsage | None:
    """A recorded usage in the host's terms: ``input_tokens`` gross (the fresh input plus the
    cache reads), the cache figures apart; ``None`` when the log gives no input figure."""
    fresh_n, read_n, written_n = count(fresh), count(read) or 0, count(written) or 0
    if fresh_n is None:
        return None
    host: dict[str, Any] = {
        "input_tokens": fresh_n + read_n,
        "cache_read_tokens": read_n,
        "cache_write_tokens": written_n,
    }
    output_n = count(output)
    if output_n is not None:
        host["output_tokens"] = output_n
    return RecordedUsage.from_mapping(host)


def json_objects(
    lines: Iterable[bytes | str],
) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """Each non-blank line as ``(number, object, "")``, or ``(number, None, why not)`` when it
    is no JSON object (nesting too deep for the parser included: never a crash)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value, reason = parse_json(line)
        if reason:
            yield number, None, reason
        elif not isinstance(value, dict):
            yield number, None, f"expected a JSON object, got {type(value).__name__}"
        else:
            yield number, cast("dict[str, Any]", value), ""


def parse_json(text: bytes | str) -> tuple[object, str]:
    """``text`` parsed, or ``None`` and why it is not JSON the tool can read."""
    try:
        return json.loads(text), ""
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    except RecursionError:
        return None, TOO_DEEP
    except ValueError as exc:
        return None, f"invalid JSON: {getattr(exc, 'msg', exc)}"


def count(value: object) -> int | None:
    """A recorded token count: a non-negative integer (never a ``bool``), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
