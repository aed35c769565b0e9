"""A test orchestrator that behaves like the published basic loop (``loop-basic``).

Per prompt: add the user message; then loop: ask the context for a view
(``get_messages_for_request(provider=provider)``), build
``amplifier_core.message_models.Message(**m)`` from every view message (a message the host
model refuses aborts the turn, as in the real loop), call the provider, store the assistant
message in the Amplifier shape (content blocks plus ``tool_calls: [{"id", "tool",
"arguments"}]``), run the tool calls in parallel and store one ``{"role": "tool", ...}``
result per call. A response without tool calls ends the prompt.

The published orchestrators (``loop-basic``, ``loop-streaming``) are not on PyPI, so this
loop stands in for them in the real-kernel tests: it sends what they send (every mounted tool,
from the coordinator's ``tools`` mount point, as ``ToolSpec(name, description,
parameters=input_schema)`` on every request; no ``max_output_tokens``) and, like them, does not
catch ``ContextLengthError``: the turn fails.

With the ``injection_chars`` config key (default 0: off) it appends to every request it sends
a request-only user message of that many characters (``metadata.source = "hook"``), as
Amplifier's hook reminders are: never stored in the context, so the context manager cannot
count it before the provider's reading shows it.

With ``request_path: "retaining"`` it asks ``get_messages_for_request_retaining(
retain_contents=[], provider=provider)`` instead (the ``context.request_retention`` shape)
of the plain call (``"plain"``, the default).

For the tests it also keeps, per request, the view it was handed and the canonical history
at that moment, so a test can run ``check_view(view, history=history)`` on every one.
Loaded by the real kernel from this directory through a module-source resolver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amplifier_core.message_models import ChatRequest, Message, ToolSpec

__amplifier_module_type__ = "orchestrator"


@dataclass(frozen=True)
class RequestRecord:
    """What the context handed out for one provider request."""

    view: list[dict[str, Any]]
    history: list[dict[str, Any]]


class E2ELoop:
    """The basic agent loop, reduced to what a context manager can observe."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.max_iterations = int(config.get("max_iterations", 64))
        self.injection_chars = int(config.get("injection_chars", 0))
        self.request_path = str(config.get("request_path", "plain"))
        if self.request_path not in ("plain", "retaining"):
            raise ValueError(
                f"loop-e2e request_path must be plain or retaining, got {self.request_path!r}"
            )
        self.requests: list[RequestRecord] = []
        self.prompts = 0

    async def execute(
        self,
        prompt: str,
        context: Any,
        providers: Mapping[str, Any],
        tools: Mapping[str, Any],
        hooks: Any,
        **kwargs: Any,
    ) -> str:
        self.prompts += 1
        await context.add_message({"role": "user", "content": prompt})
        provider = next(iter(providers.values()))
        specs = [
            ToolSpec(
                name=tool.name,
                description=tool.description,
                parameters=dict(getattr(tool, "input_schema", {}) or {}),
            )
            for tool in tools.values()
        ]
        for _ in range(self.max_iterations):
            if self.request_path == "retaining":
                view = await context.get_messages_for_request_retaining(
                    retain_contents=[], provider=provider
                )
            else:
                view = await context.get_messages_for_request(provider=provider)
            history = await context.get_messages()
            self.requests.append(RequestRecord(view=list(view), history=list(history)))
            messages = [Message(**m) for m in view]
            if self.injection_chars > 0:
                messages.append(
                    Message(
                        role="user",
                        content=reminder(self.injection_chars, self.prompts),
                        metadata={"source": "hook"},
                    )
                )
            request = ChatRequest(messages=messages, tools=specs or None)
            response = await provider.complete(request)
            calls = provider.parse_tool_calls(response)
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": [block.model_dump(exclude_none=True) for block in response.content],
            }
            if calls:
                assistant["tool_calls"] = [
                    {"id": c.id, "tool": c.name, "arguments": dict(c.arguments)} for c in calls
                ]
            await context.add_message(assistant)
            if not calls:
                return "\n".join(
                    b.text for b in response.content if getattr(b, "type", None) == "text"
                )
            outputs = await asyncio.gather(*(_run_tool(tools, c) for c in calls))
            for call, output in zip(calls, outputs, strict=True):
                await context.add_message(
                    {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output}
                )
        raise RuntimeError(f"no final answer after {self.max_iterations} iterations")


def reminder(chars: int, prompt_number: int) -> str:
    """A hook-style reminder of exactly ``chars`` characters (it changes with the prompt)."""
    head = f"<system-reminder>Prompt {prompt_number}. "
    tail = "</system-reminder>"
    line = "Keep the todo list current, cite the files you changed, and follow the style guide. "
    body = (line * (chars // len(line) + 1))[: max(0, chars - len(head) - len(tail))]
    return (head + body + tail)[:chars]


async def _run_tool(tools: Mapping[str, Any], call: Any) -> str:
    tool = tools.get(call.name)
    if tool is None:
        return f"Error: tool {call.name!r} is not available"
    result = await tool.execute(dict(call.arguments))
    if not result.success:
        return f"Error: {result.error}"
    output = result.output
    return output if isinstance(output, str) else str(output)


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    await coordinator.mount("orchestrator", E2ELoop(config or {}))
