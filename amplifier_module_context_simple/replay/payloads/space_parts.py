"""What the system prompt and the tool definitions of one recorded request are made of.

The window table gives each of them as one figure; a real session's tool definitions are
30,312 tokens of which one tool (``delegate``) is two thirds, and its system prompt is a
bundle's context files pasted one after the other. :func:`tool_parts` names every tool with
its own estimate; :func:`system_parts` names every recorded part of the system prompt: each
``system`` block (or OpenAI system/developer message), and inside a block each context file
Amplifier pasted in (``<context_file paths="bundle:path → /local/path">``, named by the
bundle path), with the text before the first file as its own part.

Each part is priced alone, with the same estimator as the whole; the estimator counts a
message's own framing once per call, so the parts add up to a little more than the whole
(tens of tokens on the real session), and the report says both figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from ... import estimate_message_tokens
from ...sizing._tool_definitions import estimate_tool_definitions, tool_definition

__all__ = ["Part", "system_parts", "tool_parts"]

_CONTEXT_FILE = re.compile(r'<context_file paths="([^"]*)"')
_NAME_CHARS = 60


@dataclass(frozen=True)
class Part:
    """One named piece of the system prompt or of the tool definitions, in estimator tokens."""

    name: str
    tokens: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "tokens": self.tokens}


def tool_parts(tools: Sequence[object], family: str | None) -> tuple[Part, ...]:
    """Every tool definition of a request with its own estimate, largest first."""
    parts = [Part(_tool_name(tool), _tool_tokens(_json(tool), family)) for tool in tools]
    return tuple(sorted(parts, key=lambda p: (-p.tokens, p.name)))


def system_parts(system: Sequence[object], family: str | None) -> tuple[Part, ...]:
    """The system prompt's recorded parts (see the module docstring), largest first; one
    part only when the prompt has no inner structure to show."""
    parts: list[Part] = []
    for number, entry in enumerate(system, start=1):
        text = _text(entry)
        label = f"block {number}" if len(system) > 1 else "the prompt"
        for name, piece in _pieces(text, label):
            parts.append(Part(name, _text_tokens(piece, family)))
    return tuple(sorted(parts, key=lambda p: -p.tokens))


def _pieces(text: str, label: str) -> list[tuple[str, str]]:
    """(name, text) of a block's context files, the text before the first one included."""
    starts = [m.start() for m in _CONTEXT_FILE.finditer(text)]
    if not starts:
        return [(label, text)]
    pieces: list[tuple[str, str]] = []
    if text[: starts[0]].strip():
        pieces.append((f"{label}, before the context files", text[: starts[0]]))
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        found = _CONTEXT_FILE.match(text, start)
        paths = found.group(1) if found else ""
        # "bundle:context/x.md → /root/.amplifier/cache/...": the bundle path says what it is.
        pieces.append((_short(paths.split(" → ", 1)[0].strip()) or "context file", text[start:end]))
    return pieces


def _short(path: str) -> str:
    """A long path by its last components (a local cache path's head says nothing)."""
    if len(path) <= _NAME_CHARS:
        return path
    tail = ""
    for component in reversed(path.split("/")):
        if len(component) + len(tail) + 3 > _NAME_CHARS:
            break
        tail = f"/{component}{tail}"
    return f"…{tail}" if tail else "…" + path[-(_NAME_CHARS - 1) :]


def _text(entry: object) -> str:
    """A system block's text: a string, a ``{"type": "text"}`` block, or a chat message."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        block = cast(Mapping[str, Any], entry)
        if isinstance(block.get("text"), str):
            return str(block["text"])
        content = block.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            items = cast(list[object], content)
            return "\n".join(_text(item) for item in items)
    return json.dumps(entry, ensure_ascii=False, default=str)


def _tool_name(tool: object) -> str:
    definition = tool_definition(tool)
    function = definition.get("function")
    name = definition.get("name")
    if not name and isinstance(function, Mapping):  # OpenAI chat wraps the definition
        name = cast(Mapping[str, Any], function).get("name")
    return str(name or "(unnamed)")


def _json(tool: object) -> str:
    return json.dumps(tool_definition(tool), ensure_ascii=False, default=str)


@lru_cache(maxsize=512)
def _tool_tokens(definition: str, family: str | None) -> int:
    # A recorded session sends the same tools with every request: each is priced once.
    return estimate_tool_definitions([json.loads(definition)], family)


@lru_cache(maxsize=64)
def _text_tokens(text: str, family: str | None) -> int:
    return estimate_message_tokens({"role": "system", "content": text}, family=family)
