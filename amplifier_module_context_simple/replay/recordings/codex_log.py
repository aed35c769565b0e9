"""Reading Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``:

* ``response_item``: what the model read and wrote: ``message`` (roles ``developer``, ``user``,
  ``assistant``), ``reasoning`` (encrypted: counted, not replayed), ``function_call`` /
  ``custom_tool_call`` and their ``..._output``;
* ``event_msg``: the agent's events; ``token_count`` carries the latest call's usage
  (``info.last_token_usage``, whose ``input_tokens`` already include ``cached_input_tokens``)
  and the model's window (``info.model_context_window``). Codex writes the same count again
  after each turn context: a count that finds no answer waiting for its usage is that call's
  again, and changes nothing;
* ``turn_context``: the model; ``session_meta``: the session;
* ``compacted``: Codex compacted its history; its ``message`` is the summary it sends from
  then on (or its ``replacement_history``, the items it keeps).

The model's output between two counts is one call's answer: one assistant message, its text
and its calls. Developer messages before the first answer are the system part; later ones are
sent as user text, where Codex puts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from .recorded_log import LoadedLog, LogBuilder, count, host_usage, json_objects
from .session_dir import RecordedUsage
from .transcripts import LineError, TranscriptError, normalise_tool_call

__all__ = ["FORMAT", "codex_problem", "load_codex_log"]

FORMAT = "codex"
COMPACTION_MARK = f"{FORMAT} compacted lines"
_KINDS = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_BLOCKS = frozenset({"input_text", "output_text", "text"})


def codex_problem(head: list[dict[str, Any]]) -> str:
    """Why the first objects of a file are no Codex rollout ("" when they are one)."""
    if any(_kind(v) in _KINDS and isinstance(v.get("payload"), dict) for v in head):
        return ""
    return "no line is {type: session_meta | response_item | ..., payload: {...}}"


def load_codex_log(lines: Iterable[bytes | str], label: str) -> LoadedLog:
    reader = _Reader()
    for number, value, reason in json_objects(lines):
        if value is None:
            reader.log.skipped.append(LineError(number, reason))
            continue
        payload = value.get("payload")
        if isinstance(payload, dict):
            reader.item(value.get("type"), cast("dict[str, Any]", payload), value)
    reader.flush(None)
    if not reader.log.messages:
        raise TranscriptError(f"{label} is a Codex rollout with no message")
    return reader.log.build(
        format=FORMAT,
        compaction_mark=COMPACTION_MARK,
        notes=reader.notes(),
        context_window=reader.window,
    )


class _Reader:
    def __init__(self) -> None:
        self.log = LogBuilder()
        self.model: str | None = None
        self.window: int | None = None
        self.blocks: list[dict[str, Any]] = []  # the answer being written
        self.calls: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}  # call id -> tool name
        self.reasoning = 0
        self.last_size: int | None = None

    def item(self, kind: object, payload: dict[str, Any], line: dict[str, Any]) -> None:
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self._count(payload.get("info"))
        elif kind == "response_item":
            self._response_item(payload)
        elif kind == "compacted":
            self._compacted(payload, line)

    def _response_item(self, item: dict[str, Any]) -> None:
        kind = _kind(item)
        if kind == "reasoning":
            self.reasoning += 1
        elif kind == "message":
            self._message(item)
        elif kind in _CALLS:
            call_id = item.get("call_id")
            name = item.get("name") if isinstance(item.get("name"), str) else kind
            arguments = item.get("arguments", item.get("input", item.get("action")))
            call = normalise_tool_call({"id": call_id, "name": name, "arguments": arguments})
            self.blocks.append(
                {"type": "tool_call", "id": call_id, "name": name, "input": call["arguments"]}
            )
            self.calls.append(call)
            if isinstance(call_id, str):
                self.names[call_id] = str(name)
        elif kind in _OUTPUTS:
            self.flush(None)
            call_id = item.get("call_id")
            if isinstance(call_id, str) and call_id in self.names:
                output = item.get("output")
                self.log.add(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": self.names[call_id],
                        "content": output if isinstance(output, str) else _text_of(output),
                    }
                )

    def _message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        text = _text_of(item.get("content"))
        if role == "assistant":
            if text:
                self.blocks.append({"type": "text", "text": text})
            return
        self.flush(None)
        if role == "developer" or role == "system":
            role = "system" if not self.log.responses else "user"
        if role in {"system", "user"}:
            self.log.add({"role": role, "content": text})

    def _count(self, info: object) -> None:
        if not isinstance(info, dict):
            return
        info = cast("dict[str, Any]", info)
        window = count(info.get("model_context_window"))
        if window:
            self.window = window
        last = info.get("last_token_usage")
        if not isinstance(last, dict):
            return
        last = cast("dict[str, Any]", last)
        fresh, cached = count(last.get("input_tokens")), count(last.get("cached_input_tokens"))
        usage = host_usage(
            None if fresh is None else fresh - min(cached or 0, fresh),
            cached,
            0,
            last.get("output_tokens"),
        )
        self.last_size = count(last.get("total_tokens"))
        if not self.flush(usage):
            # The usage of an answer its results closed already, or the same count again.
            self.log.usage_of_last(usage)

    def _compacted(self, payload: dict[str, Any], line: dict[str, Any]) -> None:
        self.flush(None)
        stamp = line.get("timestamp")
        self.log.compacted(None, self.last_size, stamp if isinstance(stamp, str) else None)
        kept = payload.get("replacement_history")
        if isinstance(kept, list):
            for item in cast("list[object]", kept):
                if isinstance(item, dict):
                    self._response_item(cast("dict[str, Any]", item))
            self.flush(None)
        elif isinstance(payload.get("message"), str):
            self.log.add({"role": "user", "content": payload["message"]})

    def flush(self, usage: RecordedUsage | None) -> bool:
        """Close the answer being written as one call's (False: none was being written)."""
        if not self.blocks:
            return False
        message: dict[str, Any] = {"role": "assistant", "content": self.blocks}
        if self.calls:
            message["tool_calls"] = self.calls
        self.log.answer(message, self.model, usage)
        self.blocks, self.calls = [], []
        return True

    def notes(self) -> list[str]:
        notes = [
            "a Codex rollout records its instructions but no tool definitions: the window "
            "figures are the replayed views'"
        ]
        if self.reasoning:
            notes.append(
                f"{self.reasoning} encrypted reasoning item(s) not replayed (no text to send)"
            )
        return notes


def _kind(value: dict[str, Any]) -> str:
    """A line's or block's ``type`` ("" when it is no string: such a line matches nothing)."""
    kind = value.get("type")
    return kind if isinstance(kind, str) else ""


def _text_of(content: object) -> str:
    """The text of Codex content blocks (``input_text``, ``output_text``) joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        b["text"]
        for b in cast("list[Any]", content)
        if isinstance(b, dict) and _kind(b) in _TEXT_BLOCKS and isinstance(b.get("text"), str)
    ]
    return "\n".join(cast("list[str]", parts))
