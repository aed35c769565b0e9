"""The tool definitions every request carries, as the provider receives them, in tokens.

The published orchestrators send every mounted tool with every request, and a real tool set
is tens of thousands of tokens (the recorded Amplifier session in the shared data carries
30,312 tokens of tool definitions beside 5,004 of conversation). The budget holds that back.

``estimate_tool_definitions`` prices a list of definitions: the JSON text of the list, each
definition in the shape Anthropic's API receives (``name``, ``description``,
``input_schema``), through the message estimator. A definition that is already a mapping
(a recorded payload's ``tools``) is priced as it is, so the replay tool and the runtime
count the same text the same way.

``ToolDefinitions`` is the cache the request path reads: a source of definitions (a fixed
list, or a callable such as ``lambda: coordinator.get("tools")``) whose estimate is
recomputed only when the set it returns changes (by name and object identity), per
tokenizer family.
"""

from __future__ import annotations

__all__ = ["ToolDefinitions", "estimate_tool_definitions", "tool_definition"]

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._estimate import estimate_message_tokens

logger = logging.getLogger(__name__)

ToolSource = Callable[[], object]
"""Returns the tools a request will carry: a mapping of name to tool, or an iterable."""


def tool_definition(tool: object) -> dict[str, Any]:
    """One tool as the provider receives it: ``{"name", "description", "input_schema"}``.

    Reads a mounted tool object (``name``, ``description``, ``input_schema`` or
    ``parameters`` attributes, as the host's ``ToolSpec`` and tool modules have them) or a
    mapping; a mapping is returned as it is, without its ``cache_control`` markers.
    """
    if isinstance(tool, Mapping):
        return {str(k): v for k, v in tool.items() if k != "cache_control"}
    schema = _attribute(tool, "input_schema")
    if schema is None:
        schema = _attribute(tool, "parameters")
    return {
        "name": str(_attribute(tool, "name") or ""),
        "description": str(_attribute(tool, "description") or ""),
        "input_schema": schema if schema is not None else {},
    }


def estimate_tool_definitions(tools: Iterable[object], family: str | None) -> int:
    """Estimated tokens of ``tools`` in one request (0 for none), in ``family``."""
    definitions = [tool_definition(tool) for tool in tools]
    if not definitions:
        return 0
    text = json.dumps(definitions, ensure_ascii=False, default=str)
    return estimate_message_tokens({"role": "system", "content": text}, family=family)


class ToolDefinitions:
    """The estimate of the tools requests carry, recomputed only when the set changes."""

    def __init__(self) -> None:
        self._source: ToolSource | None = None
        self._fixed: tuple[object, ...] = ()
        self._key: object = None
        self._tokens = 0

    def use(self, tools: Iterable[object] | ToolSource | None) -> None:
        """Read the tools from now on from ``tools``: a list, a callable, or ``None`` (none)."""
        if tools is None:
            self._source, self._fixed = None, ()
        elif callable(tools):
            self._source, self._fixed = tools, ()
        else:
            self._source, self._fixed = None, tuple(_listed(tools))
        self._key = None

    def tokens(self, family: str | None) -> int:
        """The estimate for the tools in force now (cheap while the set is unchanged)."""
        tools = self._current()
        key = (family, tuple((name, id(tool)) for name, tool in tools))
        if key != self._key:
            self._tokens = estimate_tool_definitions((tool for _, tool in tools), family)
            self._key = key
        return self._tokens

    def _current(self) -> list[tuple[str, object]]:
        if self._source is None:
            return [(str(i), tool) for i, tool in enumerate(self._fixed)]
        try:
            tools = self._source()
        except Exception:  # a coordinator that cannot list its tools holds back nothing
            logger.debug("context-simple: reading the mounted tools failed", exc_info=True)
            return []
        if isinstance(tools, Mapping):
            return [(str(name), tool) for name, tool in tools.items()]
        if tools is None or isinstance(tools, str | bytes):
            return []
        try:
            return [(str(i), tool) for i, tool in enumerate(_listed(tools))]
        except TypeError:
            return []


def _listed(tools: object) -> list[object]:
    if isinstance(tools, Mapping):
        return list(tools.values())
    if isinstance(tools, Iterable) and not isinstance(tools, str | bytes):
        return list(tools)
    raise TypeError(f"tool definitions must be a list of tools, got {type(tools).__name__}")


def _attribute(tool: object, name: str) -> Any:
    try:
        return getattr(tool, name)
    except Exception:  # missing, or a property that raises: no value either way
        return None
