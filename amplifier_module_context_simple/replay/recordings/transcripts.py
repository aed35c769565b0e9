"""Loading recorded conversations for the replay tool.

Two line-per-message formats are read here (a Claude Code session log, one event per line, is
read by :mod:`.claude_code_log`):

* ``amplifier``: the ``transcript.jsonl`` an Amplifier session writes under
  ``~/.amplifier/projects/<slug>/sessions/<id>/``. System and developer messages are left out
  by the writer, keys whose value was ``None`` are dropped, and a top-level ``timestamp`` is
  added to every line.
* ``openai-chat``: OpenAI-style chat JSONL such as the token-count corpus (``tool_calls`` with
  ``function.name`` / ``function.arguments``, ``content: null`` on call-only turns, ``image_url``
  parts, ``reasoning_content``).

The messages are handed over in the shape the context manager accepts. Message content is
never altered or dropped; the one thing rewritten is a tool call that is not in the shape the
published Amplifier orchestrators store (see :func:`normalise_tool_call`), because Amplifier's
provider modules read only that shape (the host's ``ToolCall`` and the OpenAI provider read
``name``, the Anthropic provider reads ``tool``) and would send an OpenAI-style call with an
empty name and no arguments. This is where foreign data enters, so this is where it is fixed;
the context manager itself carries stored calls verbatim. Anthropic ``tool_use`` content blocks
are content and stay as they are (the manager's view projects them for the host).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ...vocabulary._messages import CALL_BLOCK_TYPES, ROLES, SIGNED_THINKING_TYPES

__all__ = [
    "ACCEPTED_LAYOUTS",
    "RAW_ARGUMENTS_KEY",
    "RECOGNISED_FORMATS",
    "TOO_DEEP",
    "TRANSCRIPT_NAME",
    "LineError",
    "LoadedTranscript",
    "TranscriptError",
    "as_message",
    "collect_messages",
    "load_transcript",
    "normalise_tool_call",
]

TRANSCRIPT_NAME = "transcript.jsonl"
_AMPLIFIER_BLOCKS = SIGNED_THINKING_TYPES | CALL_BLOCK_TYPES
ACCEPTED_LAYOUTS = (
    "an Amplifier session directory (holding transcript.jsonl, with events.jsonl beside it "
    "or in a hook's subfolder) or its id; an Amplifier transcript.jsonl; OpenAI-chat JSONL (one "
    'message per line, or one conversation per line: {"messages": [...]}), or the same as '
    "one pretty-printed JSON document; a Claude Code session log "
    "(~/.claude/projects/<project>/<session>.jsonl), its project folder, or its session id; a "
    "Codex rollout (~/.codex/sessions/), a Pi session (~/.pi/agent/sessions/), an opencode "
    "export file or OpenCode's opencode.db, a Cline task folder, each also by its folder or "
    "session id; - for standard input"
)
"""Every layout the replay tool reads: its ``--help`` and the errors that refuse something
else name them all."""
RECOGNISED_FORMATS = "recognised: " + ACCEPTED_LAYOUTS
TOO_DEEP = "JSON nested too deep to read"
"""Why a line (or file) whose nesting the parser cannot follow is skipped: never a crash."""
RAW_ARGUMENTS_KEY = "_raw"
"""Key under which call arguments that are not a JSON object are kept, as their JSON text."""


class TranscriptError(Exception):
    """A transcript that cannot be loaded; the message is one line, fit to show a user."""


@dataclass(frozen=True)
class LineError:
    """A line that was skipped, with its 1-based number and why it was unusable."""

    line_number: int
    reason: str
    unit: str = "line"
    """What ``line_number`` counts: a ``line``, or a ``message`` of one conversation."""

    def __str__(self) -> str:
        return f"{self.unit} {self.line_number}: {self.reason}"


@dataclass(frozen=True)
class LoadedTranscript:
    """The messages of a transcript in file order, its detected format and the skipped lines."""

    messages: list[dict[str, Any]]
    format: str
    skipped: list[LineError]


_Lines = Iterator[tuple[int, str, str]]  # (1-based number, text, decoding error or "")


def load_transcript(
    source: str | Path, *, strict: bool = False, stdin: TextIO | None = None
) -> LoadedTranscript:
    """Load a transcript from a file, a session directory or standard input.

    ``source`` is a JSONL file, a session directory containing ``transcript.jsonl``, or ``"-"``
    for standard input (``stdin`` if given, else ``sys.stdin``). Unusable lines (not JSON, not
    an object, no or an unknown ``role``, fields of the wrong type) are recorded in
    ``skipped`` and the rest is still loaded; with ``strict=True`` the first one raises
    :class:`TranscriptError` naming its line number instead. Blank lines are ignored.

    The format is ``"amplifier"`` when any line shows an Amplifier trait (a top-level
    ``timestamp``, ``tool_calls`` entries with ``tool`` or dict ``arguments``, thinking or
    tool-call blocks), else ``"openai-chat"`` when any line shows an OpenAI trait; a file with
    neither counts as Amplifier only when it is named ``transcript.jsonl``.

    Normalisation: every ``tool_calls`` entry not in the stored shape is rewritten by
    :func:`normalise_tool_call` (in either format). A top-level ``timestamp`` moves into
    ``metadata["timestamp"]`` unless the metadata already has one (then it stays where it is).
    For the Amplifier format, keys holding ``None`` are dropped as the writer does, and a missing
    ``content`` becomes ``""`` so the message validates as the host's ``Message``.
    """
    label, lines, named_transcript = _read(source, stdin)
    return collect_messages(
        _parsed(lines), label=label, strict=strict, named_transcript=named_transcript
    )


def _parsed(lines: _Lines) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    for number, text, decode_error in lines:
        if decode_error:
            yield number, None, decode_error
        elif text.strip():  # blank lines are no lines
            yield number, *_parse_line(text)


def collect_messages(
    parsed: Iterable[tuple[int, dict[str, Any] | None, str]],
    *,
    label: str,
    strict: bool,
    named_transcript: bool = False,
    unit: str = "line",
) -> LoadedTranscript:
    """The usable messages of ``parsed`` (``(number, message or None, why not)``), checked
    and normalised as :func:`load_transcript` says; ``unit`` names a number in errors (a
    conversation's messages are numbered, not its lines)."""
    messages: list[dict[str, Any]] = []
    skipped: list[LineError] = []
    seen_line = False
    for number, message, reason in parsed:
        seen_line = True
        if message is None:
            if strict:
                raise TranscriptError(f"{label}: {unit} {number}: {reason}")
            skipped.append(LineError(number, reason, unit))
            continue
        messages.append(message)
    if not seen_line:
        raise TranscriptError(f"{label} is empty")
    if not messages:
        raise TranscriptError(
            f"{label} has no usable message ({len(skipped)} {unit}(s) skipped, first "
            f"{skipped[0]}); {RECOGNISED_FORMATS}"
        )
    fmt = _detect_format(messages, named_transcript)
    return LoadedTranscript([_normalise(m, fmt) for m in messages], fmt, skipped)


def _read(source: str | Path, stdin: TextIO | None) -> tuple[str, _Lines, bool]:
    """Return a label for errors, the numbered lines, and whether the file is a transcript."""
    if str(source) == "-":
        stream = stdin if stdin is not None else sys.stdin
        try:
            text = stream.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise TranscriptError(f"cannot read standard input: {exc}") from exc
        # Split on "\n" only: str.splitlines would also break on U+2028 and friends, which
        # JSON allows unescaped inside strings.
        lines = ((n, line, "") for n, line in enumerate(text.split("\n"), 1))
        return "standard input", lines, False
    path = Path(source).expanduser()
    if path.is_dir():
        candidate = path / TRANSCRIPT_NAME
        if not candidate.is_file():
            raise TranscriptError(f"{path} is a directory without a {TRANSCRIPT_NAME}")
        path = candidate
    elif not path.exists():
        raise TranscriptError(f"no such file or directory: {path}")
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return str(path), _decode_lines(handle, path), path.name == TRANSCRIPT_NAME


def _decode_lines(handle: BinaryIO, path: Path) -> _Lines:
    """Decode line by line, so one line of bad bytes costs that line and not the whole file.

    The file is streamed (a binary file splits on b"\\n" only, as JSONL wants): a large
    transcript is never held as bytes beside its messages.
    """
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                raw = line[:-1] if line.endswith(b"\n") else line
                try:
                    # utf-8-sig on the first line drops a byte-order mark some editors write.
                    yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8"), ""
                except UnicodeDecodeError as exc:
                    yield number, "", f"not valid UTF-8 (byte {exc.start + 1} of the line)"
        except OSError as exc:
            raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from exc


_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), "number")


def _parse_line(text: str) -> tuple[dict[str, Any] | None, str]:
    """Parse one line into a message, or return ``None`` and the reason it is unusable."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, TOO_DEEP
    return as_message(value)


def as_message(value: object) -> tuple[dict[str, Any] | None, str]:
    """``value`` as a message, or ``None`` and the reason it cannot be one."""
    if not isinstance(value, dict):
        return None, f"expected a JSON object, got {_json_type(value)}"
    message: dict[str, Any] = value
    problem = _shape_problem(message)
    return (None, problem) if problem else (message, "")


def _shape_problem(m: dict[str, Any]) -> str:
    """The first structural fault that would make the manager or the host reject ``m``."""
    role = m.get("role")
    if role is None:
        return "no 'role' key"
    # The roles the host's Message model accepts; any other role aborts a host turn.
    if role not in ROLES:
        return f"unknown role {role!r}"
    content = m.get("content")
    if content is not None and not isinstance(content, str | list):
        return f"'content' must be a string, an array or null, got {_json_type(content)}"
    if isinstance(content, list):
        for i, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                return f"content block {i} is not an object with a string 'type'"
    calls = m.get("tool_calls")
    if calls is not None and (
        not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)
    ):
        return "'tool_calls' must be an array of objects"
    metadata = m.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return f"'metadata' must be an object, got {_json_type(metadata)}"
    for key in ("tool_call_id", "name"):
        if m.get(key) is not None and not isinstance(m[key], str):
            return f"{key!r} must be a string, got {_json_type(m[key])}"
    return ""


def _is_amplifier(m: dict[str, Any]) -> bool:
    if "timestamp" in m:
        return True
    for call in m.get("tool_calls") or ():
        if "tool" in call or isinstance(call.get("arguments"), dict):
            return True
    content = m.get("content")
    blocks: list[Any] = content if isinstance(content, list) else []
    return any(b.get("type") in _AMPLIFIER_BLOCKS for b in blocks)


def _is_openai(m: dict[str, Any]) -> bool:
    if "reasoning_content" in m or ("content" in m and m["content"] is None):
        return True
    if any("function" in call for call in m.get("tool_calls") or ()):
        return True
    content = m.get("content")
    blocks: list[Any] = content if isinstance(content, list) else []
    return any(b.get("type") == "image_url" for b in blocks)


def _detect_format(messages: list[dict[str, Any]], named_transcript: bool) -> str:
    if any(_is_amplifier(m) for m in messages):
        return "amplifier"
    if any(_is_openai(m) for m in messages):
        return "openai-chat"
    return "amplifier" if named_transcript else "openai-chat"


def normalise_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """One ``tool_calls`` entry in the shape Amplifier orchestrators store.

    A call that has a ``tool`` key is already stored-shape and is returned unchanged (the same
    object). Any other call — OpenAI chat style ``{"id", "type": "function", "function":
    {"name", "arguments": "<json>"}}``, or the host ``ToolCall`` shape ``{"id", "name",
    "arguments"}`` — becomes ``{"id", "tool": name, "name": name, "arguments": {...}}``: both
    ``tool`` and ``name`` are carried, since the providers read one or the other. Keys other
    than ``type: "function"`` and ``function`` are kept as they are (``id`` included, whatever
    its value).

    ``arguments`` is always a dict afterwards:

    * a dict is kept; a missing or ``None`` value, or a string of only whitespace, is ``{}``;
    * a string holding a JSON object is parsed;
    * anything else — a string that is not JSON, or JSON that is not an object (``"[1, 2]"``,
      ``"42"``), or a non-string non-dict value — is kept verbatim as JSON text under
      :data:`RAW_ARGUMENTS_KEY`: ``{"_raw": "<the text as logged>"}``, so nothing is lost and
      the tool sees one clearly named argument instead of a silently empty call.

    A name that is missing or not a string becomes ``""`` (the host's ``ToolCall`` requires a
    string); the call is still kept, so it stays paired with its results.
    """
    if "tool" in call:
        return call
    function = call.get("function")
    source: dict[str, Any] = function if isinstance(function, dict) else call
    name = source.get("name")
    if not isinstance(name, str):
        name = call.get("name") if isinstance(call.get("name"), str) else ""
    arguments = source.get("arguments", call.get("arguments"))
    out: dict[str, Any] = {}
    for key, value in call.items():
        if key == "function" and isinstance(function, dict):
            continue
        if key == "type" and value == "function":
            continue
        out[key] = value
    out["tool"] = name
    out["name"] = name
    out["arguments"] = _parse_arguments(arguments)
    return out


def _parse_arguments(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            parsed = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return {RAW_ARGUMENTS_KEY: arguments}
        return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: arguments}
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(arguments)
    return {RAW_ARGUMENTS_KEY: text}


def _normalise(m: dict[str, Any], fmt: str) -> dict[str, Any]:
    calls = m.get("tool_calls")
    if isinstance(calls, list) and any("tool" not in c for c in calls):
        m = {**m, "tool_calls": [normalise_tool_call(c) for c in calls]}
    if fmt == "amplifier":
        # The writer drops None values; mirror that, then restore the one key the host's
        # Message requires (a call-only turn whose None content was dropped).
        m = {k: v for k, v in m.items() if v is not None}
        m.setdefault("content", "")
    if "timestamp" in m:
        metadata: dict[str, Any] = dict(m.get("metadata") or {})
        if "timestamp" not in metadata:
            metadata["timestamp"] = m.pop("timestamp")
            m["metadata"] = metadata
    return m
