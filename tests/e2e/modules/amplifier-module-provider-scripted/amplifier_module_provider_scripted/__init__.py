"""A scripted LLM provider for end-to-end tests: strict about what it is sent.

* Publishes its window one of two ways (config ``publish``):

  - ``"defaults"`` (the default, like a local model's provider): ``context_window`` /
    ``max_output_tokens`` in ``get_info().defaults``;
  - ``"model_info"`` (like Amplifier's Anthropic provider module): an async
    ``get_model_info()`` returning a ``ModelInfo`` with ``context_window``,
    ``max_output_tokens`` and ``defaults={"max_tokens": <what it sends>}``, while
    ``get_info().defaults`` carries only ``{"model", "max_tokens": 4096}``, a figure that
    provider publishes but does not send.

* Rejects a request, like a real API would, when any tool result has no call right before it
  or any call is left without all its results (``InvalidRequestError``), checked both with
  the package's ``check_view`` and with an independent pairing walk written here; and when
  the request does not fit its window (``ContextLengthError``, Anthropic's rule and wording):
  input over ``context_window``, or input plus the ``max_tokens`` it sends over it. What it
  sends is the request's ``max_output_tokens`` when the request sets one, else the
  ``max_tokens`` config key, which defaults to the model's ``max_output_tokens`` (as
  Amplifier's Anthropic provider does).
* Counts input tokens from the request itself: ``estimate_message_tokens`` per message, a
  fixed per-request ``framing_tokens`` allowance the context never sees and, with
  ``count_tool_definitions``, every tool definition in ``request.tools`` as the JSON the
  Anthropic API receives (``{"name", "description", "input_schema"}``) wrapped as a user
  message and estimated in the ``tool_token_family`` (default ``claude47``), plus
  ``tool_framing_tokens`` per tool. It simulates a prompt cache (the framing and tool
  definitions, then the longest byte-identical message prefix shared with the previous request
  are a cache read, the newest message is fresh input, the rest is a cache write) and emits
  ``llm:request`` / ``llm:response`` through the coordinator's hook registry with a normalised
  ``usage`` dict, as the published providers do.
* Scripts the conversation: per prompt, ``turns_per_prompt`` rounds of parallel ``echo``
  calls (1-3 per round by default, exactly ``calls_per_round`` when set; sizes cycling
  through ``sizes``), then a final text answer (``answer_chars`` characters when set).
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
from amplifier_core.models import ModelInfo, ProviderInfo

from amplifier_module_context_simple import check_view, estimate_message_tokens

__amplifier_module_type__ = "provider"

DEFAULT_SIZES = (300, 1_800, 700, 6_000, 1_000, 500, 8_000, 2_200)
NON_HUMAN_SOURCES = ("context-compaction", "hook")
PUBLISH_STYLES = ("defaults", "model_info")
PUBLISHED_MAX_TOKENS = 4096  # Anthropic's provider module: get_info().defaults, never sent


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
    max_tokens: int = 0
    tool_tokens: int = 0

    @property
    def request_size(self) -> int:
        """What the provider checks against its window: input plus the output it asks for."""
        return self.input_total + self.max_tokens


@dataclass(frozen=True)
class Refusal:
    """One request refused for its size."""

    exchange: int  # how many requests had been accepted before it
    input_total: int
    max_tokens: int
    tool_tokens: int
    text: str
    prompt: str | None


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
        # What it sends as max_tokens when the request names none: the model's max output.
        self.max_tokens = int(config.get("max_tokens", self.max_output_tokens))
        self.publish = str(config.get("publish", "defaults"))
        if self.publish not in PUBLISH_STYLES:
            raise ValueError(f"publish must be one of {PUBLISH_STYLES}, got {self.publish!r}")
        self.turns_per_prompt = int(config.get("turns_per_prompt", 12))
        calls = config.get("calls_per_round")
        self.calls_per_round = int(calls) if calls is not None else None
        answer = config.get("answer_chars")
        self.answer_chars = int(answer) if answer is not None else None
        self.framing_tokens = int(config.get("framing_tokens", 400))
        self.count_tool_definitions = bool(config.get("count_tool_definitions", False))
        family = config.get("tool_token_family", "claude47")
        self.tool_token_family = None if family is None else str(family)
        self.tool_framing_tokens = int(config.get("tool_framing_tokens", 10))
        self.sizes = tuple(int(s) for s in config.get("sizes", DEFAULT_SIZES))
        self.exchanges: list[Exchange] = []
        self.rejections: list[str] = []
        self.refused: list[Refusal] = []
        self._previous: list[str] = []
        self._previous_tools: int | None = None
        self._tool_tokens: dict[str, int] = {}
        self._message_tokens: dict[str, int] = {}
        self._prompt: str | None = None
        self._turn = 0
        self._serial = 0
        self._calls = 0

    # ------------------------------------------------------------------ what it publishes

    def get_info(self) -> ProviderInfo:
        if self.publish == "model_info":
            defaults: dict[str, Any] = {"model": self.model, "max_tokens": PUBLISHED_MAX_TOKENS}
        else:
            defaults = {
                "model": self.model,
                "context_window": self.context_window,
                "max_output_tokens": self.max_output_tokens,
            }
        return ProviderInfo(id="scripted", display_name="Scripted test provider", defaults=defaults)

    def _model_info(self) -> ModelInfo:
        return ModelInfo(
            id=self.model,
            display_name=f"Scripted {self.model}",
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
            defaults={"max_tokens": self.max_tokens},
        )

    async def list_models(self) -> list[Any]:
        return [self._model_info()] if self.publish == "model_info" else []

    def parse_tool_calls(self, response: ChatResponse) -> list[ToolCall]:
        return list(response.tool_calls or [])

    # ------------------------------------------------------------------ counting

    def tool_definition_tokens(self, tools: Sequence[Any] | None) -> int:
        """What the request's tool definitions cost, as this provider counts them (0 if off)."""
        if not self.count_tool_definitions or not tools:
            return 0
        total = 0
        for tool in tools:
            text = json.dumps(anthropic_tool(tool))
            tokens = self._tool_tokens.get(text)
            if tokens is None:
                tokens = estimate_message_tokens(
                    {"role": "user", "content": text}, family=self.tool_token_family
                )
                self._tool_tokens[text] = tokens
            total += tokens + self.tool_framing_tokens
        return total

    def _count(self, key: str, message: Mapping[str, Any]) -> int:
        tokens = self._message_tokens.get(key)
        if tokens is None:
            tokens = self._message_tokens[key] = estimate_message_tokens(message)
        return tokens

    # ------------------------------------------------------------------ a request

    async def complete(self, request: ChatRequest, **kwargs: Any) -> ChatResponse:
        messages = [m.model_dump(exclude_none=True) for m in request.messages]
        problems = check_view(messages) + pairing_problems(messages)
        if problems:
            self.rejections.append("; ".join(problems))
            raise InvalidRequestError(
                "invalid tool pairing: " + "; ".join(problems), provider=self.name
            )
        keys = [json.dumps(m, sort_keys=True) for m in messages]
        tokens = [self._count(k, m) for k, m in zip(keys, messages, strict=True)]
        tool_tokens = self.tool_definition_tokens(request.tools)
        overhead = self.framing_tokens + tool_tokens
        total = overhead + sum(tokens)
        max_tokens = (
            request.max_output_tokens if request.max_output_tokens is not None else self.max_tokens
        )
        if total > self.context_window:
            text = f"prompt is too long: {total} tokens > {self.context_window} maximum"
        elif total + max_tokens > self.context_window:
            text = (
                f"input length and `max_tokens` exceed context limit: {total} + {max_tokens} > "
                f"{self.context_window}, decrease input length or `max_tokens` and try again"
            )
        else:
            text = None
        if text is not None:
            self.rejections.append(f"over the window: {text}")
            self.refused.append(
                Refusal(len(self.exchanges), total, max_tokens, tool_tokens, text, self._prompt)
            )
            raise ContextLengthError(text, provider=self.name, model=self.model, status_code=400)
        await self.coordinator.hooks.emit(
            "llm:request",
            {"provider": self.name, "model": self.model, "message_count": len(messages)},
        )

        prefix = 0
        while (
            prefix < min(len(keys), len(self._previous)) and keys[prefix] == self._previous[prefix]
        ):
            prefix += 1
        self._previous = keys
        cached_overhead = overhead if self._previous_tools == tool_tokens else 0
        self._previous_tools = tool_tokens
        cache_read = cached_overhead + sum(tokens[:prefix])
        fresh = tokens[-1] if prefix < len(tokens) else 0
        cache_write = total - cache_read - fresh

        response = self._script(messages)
        calls = response.tool_calls or []
        output_tokens = 40 + 30 * len(calls)
        if not calls and self.answer_chars is not None:
            output_tokens = estimate_message_tokens(
                {"role": "assistant", "content": _answer_text(response)}
            )
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
            Exchange(
                messages,
                total,
                cache_read,
                cache_write,
                fresh,
                prefix,
                len(calls),
                max_tokens=max_tokens,
                tool_tokens=tool_tokens,
            )
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
            text = f"All {self.turns_per_prompt} steps are done."
            if self.answer_chars is not None:
                text = answer(self._serial, self.answer_chars)
            return ChatResponse(content=[TextBlock(text=text)], finish_reason="end_turn")
        self._serial += 1
        serial = self._serial
        calls: list[ToolCall] = []
        count = self.calls_per_round if self.calls_per_round is not None else 1 + serial % 3
        for k in range(count):
            if self.calls_per_round is not None:  # every size in turn, call after call
                size = self.sizes[self._calls % len(self.sizes)]
                self._calls += 1
            else:
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


def anthropic_tool(tool: Any) -> dict[str, Any]:
    """A request's ``ToolSpec`` as the Anthropic Messages API receives it."""
    return {
        "name": tool.name,
        "description": tool.description or "",
        "input_schema": dict(tool.parameters or {}),
    }


def answer(serial: int, chars: int) -> str:
    """A deterministic final answer of exactly ``chars`` characters."""
    sentence = (
        f"Step {serial} is complete: every check passed, the outputs were collected and the "
        "slowest stages are listed in the report above. "
    )
    return (sentence * (chars // len(sentence) + 1))[:chars]


def _answer_text(response: ChatResponse) -> str:
    return "".join(b.text for b in response.content if isinstance(b, TextBlock))


class ModelInfoScriptedProvider(ScriptedProvider):
    """The ``publish: "model_info"`` style: ``get_model_info()`` exists, as on Anthropic's."""

    async def get_model_info(self) -> ModelInfo:
        return self._model_info()


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    config = config or {}
    style = ModelInfoScriptedProvider if config.get("publish") == "model_info" else ScriptedProvider
    provider = style(coordinator, config)
    await coordinator.mount("providers", provider, name=provider.name)
