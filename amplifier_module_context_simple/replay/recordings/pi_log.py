"""Reading Pi sessions (``~/.pi/agent/sessions/--<path>--/<timestamp>_<uuid>.jsonl``).

The first line is the ``session`` header; every later entry has an ``id`` and a ``parentId``,
so a session is a tree (the user can go back and branch). The conversation is the path from
the root to the last entry written, and only that path is replayed.

* ``message`` entries hold ``message.role``: ``user``, ``assistant`` (content blocks ``text``,
  ``thinking``, ``toolCall``; its ``model`` and ``usage``: ``input`` without the cache,
  ``cacheRead``, ``cacheWrite``, ``output``), ``toolResult`` (``toolCallId``, ``toolName``);
* ``compaction`` entries mark Pi's own compaction (``summary``, ``tokensBefore``): from then on
  Pi sends the summary and the messages it kept;
* ``model_change``, ``thinking_level_change`` and the rest are settings, counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, cast

from .recorded_log import LoadedLog, LogBuilder, count, host_usage, json_objects
from .transcripts import LineError, TranscriptError, normalise_tool_call

__all__ = ["FORMAT", "load_pi_log", "pi_problem"]

FORMAT = "pi"
COMPACTION_MARK = f"{FORMAT} compaction entries"


def pi_problem(head: list[dict[str, Any]]) -> str:
    """Why the first objects of a file are no Pi session ("" when they are one)."""
    header = bool(head) and head[0].get("type") == "session" and "parentId" not in head[0]
    if header and (len(head) == 1 or any("parentId" in v for v in head[1:])):
        return ""
    return 'its first line is no {"type": "session"} header followed by entries with a parentId'


def load_pi_log(lines: Iterable[bytes | str], label: str) -> LoadedLog:
    entries: dict[str, dict[str, Any]] = {}
    last: str | None = None
    skipped: list[LineError] = []
    for number, value, reason in json_objects(lines):
        if value is None:
            skipped.append(LineError(number, reason))
        elif isinstance(value.get("id"), str) and value.get("type") != "session":
            entries[value["id"]] = value
            last = value["id"]
    path = _branch(entries, last)
    reader = _Reader()
    reader.log.skipped.extend(skipped)
    for entry in path:
        reader.entry(entry)
    if not reader.log.messages:
        raise TranscriptError(
            f"{label} is a Pi session whose conversation (the {len(path)} entries leading to "
            "its last) holds no message"
        )
    branches = len(entries) - len(path)
    return reader.log.build(
        format=FORMAT, compaction_mark=COMPACTION_MARK, notes=reader.notes(branches)
    )


def _branch(entries: dict[str, dict[str, Any]], last: str | None) -> list[dict[str, Any]]:
    """The entries from the root to ``last``, in order (a cycle ends the walk)."""
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    current = last
    while isinstance(current, str) and current in entries and current not in seen:
        seen.add(current)
        path.append(entries[current])
        current = entries[current].get("parentId")
    return path[::-1]


class _Reader:
    def __init__(self) -> None:
        self.log = LogBuilder()
        self.model: str | None = None
        self.names: dict[str, str] = {}
        self.other: Counter[str] = Counter()
        self.last_size: int | None = None

    def entry(self, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
        if kind == "model_change" and isinstance(entry.get("modelId"), str):
            self.model = entry["modelId"]
        if kind == "compaction":
            tokens = count(entry.get("tokensBefore"))
            self.log.compacted(None, tokens if tokens is not None else self.last_size, stamp)
            if isinstance(entry.get("summary"), str):
                self.log.add({"role": "user", "content": entry["summary"]})
            return
        message = entry.get("message")
        if kind != "message" or not isinstance(message, dict):
            self.other[str(kind)] += 1
            return
        self._message(cast("dict[str, Any]", message))

    def _message(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            self.log.add({"role": "user", "content": _user_content(content)})
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            if isinstance(call_id, str) and call_id in self.names:
                result: dict[str, Any] = {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": self.names[call_id],
                    "content": _user_content(content),
                }
                if message.get("isError") is True:
                    result["metadata"] = {"is_error": True}
                self.log.add(result)
        elif role == "assistant":
            self._assistant(message, content)
        else:
            self.other[f"{role} message"] += 1

    def _assistant(self, message: dict[str, Any], content: object) -> None:
        blocks: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in cast("list[Any]", content) if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            block = cast("dict[str, Any]", block)
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                blocks.append({"type": "text", "text": block["text"]})
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                thinking = {"type": "thinking", "thinking": block["thinking"]}
                if isinstance(block.get("thinkingSignature"), str):
                    thinking["signature"] = block["thinkingSignature"]
                blocks.append(thinking)
            elif kind == "toolCall" and isinstance(block.get("id"), str):
                call = normalise_tool_call(
                    {
                        "id": block["id"],
                        "name": block.get("name"),
                        "arguments": block.get("arguments"),
                    }
                )
                calls.append(call)
                self.names[block["id"]] = call["name"]
                blocks.append(
                    {"type": "tool_call", "id": call["id"], "name": call["name"],
                     "input": call["arguments"]}
                )  # fmt: skip
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        stored: dict[str, Any] = {"role": "assistant", "content": blocks}
        if calls:
            stored["tool_calls"] = calls
        model = message.get("model") if isinstance(message.get("model"), str) else self.model
        usage = message.get("usage")
        recorded = None
        if isinstance(usage, dict):
            usage = cast("dict[str, Any]", usage)
            recorded = host_usage(
                usage.get("input"), usage.get("cacheRead"), usage.get("cacheWrite"),
                usage.get("output"),
            )  # fmt: skip
            self.last_size = recorded.occupancy if recorded is not None else self.last_size
        self.log.answer(stored, model, recorded)

    def notes(self, branches: int) -> list[str]:
        notes = [
            "a Pi session records no system prompt and no tool definitions: the window "
            "figures are the replayed views'"
        ]
        if branches:
            notes.append(
                f"{branches} entr(y/ies) on other branches left out: the conversation is the "
                "path to the last entry"
            )
        if self.other:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.other.most_common())
            notes.append(f"entries that are not messages, skipped: {kinds}")
        return notes


def _user_content(content: object) -> str | list[dict[str, Any]]:
    """User or result content as a message holds it: text blocks as they are, Pi's images as
    the Anthropic base64 image block."""
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for block in cast("list[Any]", content) if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        block = cast("dict[str, Any]", block)
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            blocks.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image" and isinstance(block.get("data"), str):
            media = block.get("mimeType") if isinstance(block.get("mimeType"), str) else "image/png"
            blocks.append(
                {"type": "image",
                 "source": {"type": "base64", "media_type": media, "data": block["data"]}}
            )  # fmt: skip
    return blocks
