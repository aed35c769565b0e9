"""A scripted LLM provider for end-to-end tests: strict about what it is sent.

* Publishes ``context_window`` / ``max_output_tokens`` in ``get_info().defaults``.
* Rejects a request, like a real API would, when any tool result has no call right before it
  or any call is left without all its results (``InvalidRequestError``), checked both with
  the package's ``check_view`` and with an independent pairing walk written here; and when
  the request does not fit its window (``ContextLengthError``: input plus ``max_output_tokens``
  over ``context_window``).
* Counts input tokens from the request itself (``estimate_message_tokens`` per message plus
  a fixed framing allowance for tool schemas and request overhead the context never sees),
  simulates a prompt cache (the longest byte-identical message prefix shared with the previous
  request is a cache read, the newest message is fresh input, the rest is a cache write) and
  emits ``llm:request`` / ``llm:response`` through the coordinator's hook registry with a
  normalised ``usage`` dict, as the published providers do.
* Scripts the conversation: per prompt, ``turns_per_prompt`` turns of 1-3 parallel ``echo``
  calls (sizes cycling through ``sizes``), then a final text answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amplifier_core.llm_errors import ContextLengthError, InvalidRequestError
from amplifier_core.message_models import (
    ChatRequest,
    ChatResponse,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolCallBlock,
    Usage,
)
from amplifier_core.models import ProviderInfo

from amplifier_module_context_simple import check_view, estimate_message_tokens

__amplifier_module_type__ = "provider"

DEFAULT_SIZES = (300, 1_800, 700, 6_000, 1_000, 500, 8_000, 2_200)
NON_HUMAN_SOURCES = ("context-compaction", "hook")


@dataclass(frozen=True)
class Exchange:
    """One accepted request and the usage reported for it."""

    messages: list[dict[str, Any]]
    input_total: int
    cache_read: int
    cache_write: int
    fresh: int
    prefix_messages: int
    tool_calls: int


def pairing_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """An independent, strict pairing check: every call answered right away, no orphans.

    Unlike ``check_view`` it also refuses an unanswered call at the end: a request sent to
    a provider has no tool still running.
    """
    problems: list[str] = []
    waiting: list[str] = []
    for index, message in enumerate(messages):
        answered = _result_ids(message)
        if answered:
            for call_id in answered:
                if call_id in waiting:
                    waiting.remove(call_id)
                else:
                    problems.append(f"message {index}: orphan result for {call_id!r}")
            continue
        if waiting:
            problems.append(f"message {index}: calls {waiting} were not answered before it")
        waiting = list(_call_ids(message))
    if waiting:
        problems.append(f"the request ends with unanswered calls {waiting}")
    return problems


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping)]


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    ids: list[str] = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            ids.append(call["id"])
    for block in _blocks(message):
        if block.get("type") in ("tool_call", "tool_use") and isinstance(block.get("id"), str):
            ids.append(block["id"])
    return list(dict.fromkeys(ids))


def _result_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        return [call_id] if isinstance(call_id, str) else ["<missing tool_call_id>"]
    ids: list[str] = []
    for block in _blocks(message):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id") or block.get("tool_call_id")
            ids.append(call_id if isinstance(call_id, str) else "<missing id>")
    return ids


def _is_human(message: Mapping[str, Any]) -> bool:
    if message.get("role") != "user" or not isinstance(message.get("content"), str):
        return False
    metadata = message.get("metadata")
    return not (isinstance(metadata, Mapping) and metadata.get("source") in NON_HUMAN_SOURCES)


class ScriptedProvider:
    """See the module docstring."""

    name = "scripted"

    def __init__(self, coordinator: Any, config: Mapping[str, Any]) -> None:
        self.coordinator = coordinator
        self.model = str(config.get("model", "scripted-1"))
        self.context_window = int(config.get("context_window", 24_000))
        self.max_output_tokens = int(config.get("max_output_tokens", 4_096))
        self.turns_per_prompt = int(config.get("turns_per_prompt", 12))
        self.framing_tokens = int(config.get("framing_tokens", 400))
        self.sizes = tuple(int(s) for s in config.get("sizes", DEFAULT_SIZES))
        self.exchanges: list[Exchange] = []
        self.rejections: list[str] = []
        self._previous: list[str] = []
        self._prompt: str | None = None
        self._turn = 0
        self._serial = 0

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(
            id="scripted",
            display_name="Scripted test provider",
            defaults={
                "model": self.model,
                "context_window": self.context_window,
                "max_output_tokens": self.max_output_tokens,
            },
        )

    async def list_models(self) -> list[Any]:
        return []

    def parse_tool_calls(self, response: ChatResponse) -> list[ToolCall]:
        return list(response.tool_calls or [])

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        messages = [m.model_dump(exclude_none=True) for m in request.messages]
        problems = check_view(messages) + pairing_problems(messages)
        if problems:
            self.rejections.append("; ".join(problems))
            raise InvalidRequestError(
                "invalid tool pairing: " + "; ".join(problems), provider=self.name
            )
        tokens = [estimate_message_tokens(m) for m in messages]
        total = self.framing_tokens + sum(tokens)
        if total + self.max_output_tokens > self.context_window:
            self.rejections.append(f"over the window: {total} input tokens")
            raise ContextLengthError(
                f"prompt is too long: {total} + {self.max_output_tokens} > {self.context_window}",
                provider=self.name,
                model=self.model,
                status_code=400,
            )
        await self.coordinator.hooks.emit(
            "llm:request",
            {"provider": self.name, "model": self.model, "message_count": len(messages)},
        )

        keys = [json.dumps(m, sort_keys=True) for m in messages]
        prefix = 0
        while (
            prefix < min(len(keys), len(self._previous)) and keys[prefix] == self._previous[prefix]
        ):
            prefix += 1
        self._previous = keys
        cache_read = (self.framing_tokens if self.exchanges else 0) + sum(tokens[:prefix])
        fresh = tokens[-1] if prefix < len(tokens) else 0
        cache_write = total - cache_read - fresh

        response = self._script(messages)
        calls = response.tool_calls or []
        output_tokens = 40 + 30 * len(calls)
        usage = {
            "input_tokens": cache_read + fresh,
            "output_tokens": output_tokens,
            "total_tokens": cache_read + fresh + cache_write + output_tokens,
            "cache_read_tokens": cache_read,
            "cache_write_tokens": cache_write,
        }
        response.usage = Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            total_tokens=usage["total_tokens"],
            cache_read_tokens=usage["cache_read_tokens"],
            cache_write_tokens=usage["cache_write_tokens"],
        )
        self.exchanges.append(
            Exchange(messages, total, cache_read, cache_write, fresh, prefix, len(calls))
        )
        await self.coordinator.hooks.emit(
            "llm:response",
            {"provider": self.name, "model": self.model, "status": "ok", "usage": usage},
        )
        return response

    def _script(self, messages: Sequence[Mapping[str, Any]]) -> ChatResponse:
        prompt = next((m["content"] for m in reversed(messages) if _is_human(m)), None)
        if prompt != self._prompt:
            self._prompt, self._turn = prompt, 0
        self._turn += 1
        if self._turn > self.turns_per_prompt:
            return ChatResponse(
                content=[TextBlock(text=f"All {self.turns_per_prompt} steps are done.")],
                finish_reason="end_turn",
            )
        self._serial += 1
        serial = self._serial
        calls: list[ToolCall] = []
        for k in range(1 + serial % 3):
            size = self.sizes[(serial * 3 + k) % len(self.sizes)]
            calls.append(
                ToolCall(
                    id=f"call_{serial:03d}_{k}",
                    name="echo",
                    arguments={"size": size, "label": f"step{serial}.{k}"},
                )
            )
        content: list[Any] = [
            ThinkingBlock(
                thinking=f"Step {serial}: run {len(calls)} checks.", signature=f"sig{serial}"
            ),
            TextBlock(text=f"Running {len(calls)} checks for step {serial}."),
            *(ToolCallBlock(id=c.id, name=c.name, input=dict(c.arguments)) for c in calls),
        ]
        return ChatResponse(content=content, tool_calls=calls, finish_reason="tool_use")


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    provider = ScriptedProvider(coordinator, config or {})
    await coordinator.mount("providers", provider, name=provider.name)
