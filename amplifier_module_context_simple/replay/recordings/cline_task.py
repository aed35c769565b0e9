"""Reading Cline task folders (``.../saoudrizwan.claude-dev/tasks/<id>/``, or the CLI's
``~/.cline/data/tasks/<id>/``).

``api_conversation_history.json`` is the conversation Cline sends, pretty-printed: Anthropic
messages, each assistant one with its ``modelInfo.modelId`` and ``metrics.tokens``
(``prompt`` without the cache, ``cached``, ``completion``). ``task_metadata.json`` beside it
names the model too.

Cline answers its calls in two ways: ``tool_result`` blocks, or text blocks in the next user
message that begin ``[<tool name> ...] Result:``. Either way each becomes the call's result
(the calls are answered in order); a call nothing answers is left to the replay's placeholder,
as an interrupted call is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from .claude_code_log import content_blocks, result_content, stored_block, tool_use_call
from .recorded_log import LoadedLog, LogBuilder, count, host_usage, parse_json
from .transcripts import TranscriptError

__all__ = ["FORMAT", "HISTORY_NAME", "METADATA_NAME", "cline_problem", "load_cline_task"]

FORMAT = "cline"
COMPACTION_MARK = f"{FORMAT} (its history marks none)"
HISTORY_NAME = "api_conversation_history.json"
METADATA_NAME = "task_metadata.json"


def cline_problem(document: object) -> str:
    """Why a JSON document is no Cline conversation history ("" when it is one)."""
    if isinstance(document, list) and any(
        isinstance(m, dict) and ("modelInfo" in m or "metrics" in m)
        for m in cast("list[Any]", document)
    ):
        return ""
    return "not a list of messages carrying Cline's modelInfo / metrics"


def load_cline_task(history: object, label: str, metadata: Path | None = None) -> LoadedLog:
    """A task's conversation (``history``: its ``api_conversation_history.json`` parsed)."""
    if not isinstance(history, list):
        raise TranscriptError(f"{label} is no list of messages")
    fallback = _metadata_model(metadata)
    reader = _Reader(fallback)
    for entry in cast("list[Any]", history):
        if isinstance(entry, dict):
            reader.message(cast("dict[str, Any]", entry))
    if not reader.log.messages:
        raise TranscriptError(f"{label} is a Cline task with no message")
    notes = [
        "a Cline task records no system prompt and no tool definitions: the window figures "
        "are the replayed views'"
    ]
    if reader.text_results:
        notes.append(
            f"{reader.text_results} call result(s) Cline sent as text ([tool] Result:) read as "
            "those calls' results"
        )
    return reader.log.build(format=FORMAT, compaction_mark=COMPACTION_MARK, notes=notes)


def _metadata_model(path: Path | None) -> str | None:
    if path is None or not path.is_file():
        return None
    try:
        value, _ = parse_json(path.read_bytes())
    except OSError:
        return None
    usage = cast("dict[str, Any]", value).get("model_usage") if isinstance(value, dict) else None
    for entry in cast("list[Any]", usage) if isinstance(usage, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("model_id"), str):
            return cast("str", entry["model_id"])
    return None


class _Reader:
    def __init__(self, model: str | None) -> None:
        self.log = LogBuilder()
        self.model = model
        self.pending: list[dict[str, Any]] = []  # calls not answered yet, in order
        self.text_results = 0

    def message(self, entry: dict[str, Any]) -> None:
        blocks = content_blocks(entry.get("content")) or []
        if entry.get("role") == "assistant":
            self._assistant(entry, blocks)
        elif entry.get("role") == "user":
            self._user(blocks)

    def _assistant(self, entry: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
        calls = [tool_use_call(b) for b in blocks if b.get("type") == "tool_use"]
        stored = [
            stored_block(b, tool_use_call(b) if b.get("type") == "tool_use" else None)
            for b in blocks
        ]
        message: dict[str, Any] = {"role": "assistant", "content": stored}
        if calls:
            message["tool_calls"] = calls
        info = entry.get("modelInfo")
        model = cast("dict[str, Any]", info).get("modelId") if isinstance(info, dict) else None
        self.log.answer(message, model if isinstance(model, str) else self.model, _usage(entry))
        self.pending = [c for c in calls if isinstance(c.get("id"), str)]

    def _user(self, blocks: list[dict[str, Any]]) -> None:
        rest: list[dict[str, Any]] = []
        for block in blocks:
            call = self._answered(block)
            if call is None:
                rest.append(block)
                continue
            content = block.get("content") if block.get("type") == "tool_result" else block["text"]
            self.log.add(
                {"role": "tool", "tool_call_id": call["id"], "name": call["name"],
                 "content": result_content(content)}
            )  # fmt: skip
        self.pending = []
        if rest:
            self.log.add({"role": "user", "content": rest})

    def _answered(self, block: dict[str, Any]) -> dict[str, Any] | None:
        """The pending call ``block`` answers, taken off the list (None: it answers none)."""
        if block.get("type") == "tool_result":
            for call in self.pending:
                if call["id"] == block.get("tool_use_id"):
                    self.pending.remove(call)
                    return call
            return None
        text = block.get("text")
        if (
            self.pending
            and isinstance(text, str)
            and text.startswith(f"[{self.pending[0]['name']}")
        ):
            self.text_results += 1
            return self.pending.pop(0)
        return None


def _usage(entry: dict[str, Any]) -> Any:
    metrics = entry.get("metrics")
    tokens = cast("dict[str, Any]", metrics).get("tokens") if isinstance(metrics, dict) else None
    if not isinstance(tokens, dict):
        return None
    tokens = cast("dict[str, Any]", tokens)
    return host_usage(
        tokens.get("prompt"), count(tokens.get("cached")), 0, tokens.get("completion")
    )
