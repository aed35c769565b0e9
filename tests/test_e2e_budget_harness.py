"""The harness of ``tests/test_e2e_request_budget.py`` does what issue 20's rows need.

These pass whatever the package's budget does: they check the scripted provider (what it
publishes, what it counts, how it refuses), the bulky tool and the loop's injection in a real
kernel session, so a failing row means the module, not the harness.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import ChatRequest, Message
from amplifier_core.models import ModelInfo

from amplifier_module_context_simple import estimate_message_tokens

from .e2e.budget_rows import (
    ANSWER_CHARS,
    INJECTION_ROW,
    ROWS,
    SIZES,
    TOOL_DEFINITION_TOKENS,
    Row,
    prompt,
)
from .e2e.sources import LocalSourceResolver


@dataclass
class Live:
    session: AmplifierSession
    context: Any
    provider: Any
    orchestrator: Any
    tools: dict[str, Any]


@pytest.fixture
async def live(request: pytest.FixtureRequest) -> AsyncIterator[Live]:
    row: Row = request.param
    session = AmplifierSession(row.plan({}))
    await session.coordinator.mount("module-source-resolver", LocalSourceResolver())
    await session.initialize()
    coordinator = session.coordinator
    try:
        yield Live(
            session=session,
            context=coordinator.get("context"),
            provider=coordinator.get("providers")["scripted"],
            orchestrator=coordinator.get("orchestrator"),
            tools=dict(coordinator.get("tools")),
        )
    finally:
        await session.cleanup()


SONNET_TOOLS = ROWS[1]
"""200,000 / 64,000, publish model_info, the bulky tool."""
LOCAL_INJECTED = dataclasses.replace(INJECTION_ROW, context_window=200_000)
"""The injection row's modules on a window two prompts cannot overflow, whatever the budget."""


def _tokens(spec: dict[str, Any], family: str | None = "claude47") -> int:
    return estimate_message_tokens({"role": "user", "content": json.dumps(spec)}, family=family)


@pytest.mark.parametrize("live", [SONNET_TOOLS], indirect=True, ids=["200k-64k-tools"])
async def test_the_provider_publishes_like_anthropics_module(live: Live) -> None:
    info = live.provider.get_info()
    assert info.defaults == {"model": "scripted-1", "max_tokens": 4096}
    model = await live.provider.get_model_info()
    assert isinstance(model, ModelInfo)
    assert (model.context_window, model.max_output_tokens) == (200_000, 64_000)
    assert model.defaults == {"max_tokens": 64_000}, "what it sends"
    assert await live.provider.list_models() == [model]


@pytest.mark.parametrize("live", [ROWS[3]], indirect=True, ids=["64k-4k-tools"])
async def test_the_defaults_style_publishes_the_window_in_get_info(live: Live) -> None:
    assert live.provider.get_info().defaults == {
        "model": "scripted-1",
        "context_window": 64_000,
        "max_output_tokens": 4_000,
    }
    assert not hasattr(live.provider, "get_model_info")


@pytest.mark.parametrize("live", [SONNET_TOOLS], indirect=True, ids=["200k-64k-tools"])
async def test_the_bulky_tool_is_about_30000_tokens_and_counted_in_every_request(
    live: Live,
) -> None:
    assert list(live.tools) == ["echo", "bulky"]
    bulky = live.tools["bulky"]
    spec = {"name": "bulky", "description": bulky.description, "input_schema": bulky.input_schema}
    by_family = {family: _tokens(spec, family) for family in (None, "o200k", "claude3", "claude47")}
    assert TOOL_DEFINITION_TOKENS <= by_family[None] <= TOOL_DEFINITION_TOKENS + 200
    assert by_family["claude47"] == by_family[None], "the largest family for this JSON"
    assert by_family["o200k"] < by_family["claude3"] < by_family["claude47"]

    await live.session.execute(prompt(1))
    exchanges = live.provider.exchanges
    assert len(exchanges) == 3
    echo = live.tools["echo"]
    echo_spec = {"name": "echo", "description": echo.description, "input_schema": echo.input_schema}
    expected = _tokens(spec) + _tokens(echo_spec) + 2 * live.provider.tool_framing_tokens
    assert {x.tool_tokens for x in exchanges} == {expected}
    for x in exchanges:
        messages = sum(estimate_message_tokens(m) for m in x.messages)
        assert x.input_total == live.provider.framing_tokens + expected + messages
        assert x.max_tokens == 64_000


@pytest.mark.parametrize("live", [SONNET_TOOLS], indirect=True, ids=["200k-64k-tools"])
async def test_the_provider_refuses_like_anthropic(live: Live) -> None:
    big = "word " * 200_000  # about 272,000 tokens
    request = ChatRequest(messages=[Message(role="user", content=big)])
    too_long = r"prompt is too long: \d+ tokens > 200000 maximum"
    with pytest.raises(ContextLengthError, match=too_long):
        await live.provider.complete(request)
    fits_alone = "word " * 120_000  # about 163,000 tokens
    request = ChatRequest(messages=[Message(role="user", content=fits_alone)])
    size = live.provider.framing_tokens + estimate_message_tokens(
        {"role": "user", "content": fits_alone}
    )
    assert size + 64_000 > 200_000 >= size + 20_000
    with pytest.raises(ContextLengthError) as refused:
        await live.provider.complete(request)
    assert str(refused.value) == (
        f"input length and `max_tokens` exceed context limit: {size} + 64000 > 200000, "
        "decrease input length or `max_tokens` and try again"
    )
    assert [r.max_tokens for r in live.provider.refused] == [64_000, 64_000]
    # The request's own max_output_tokens is what it sends, when the request names one.
    request = ChatRequest(
        messages=[Message(role="user", content=fits_alone)], max_output_tokens=20_000
    )
    await live.provider.complete(request)
    assert live.provider.exchanges[-1].request_size == size + 20_000


@pytest.mark.parametrize("live", [LOCAL_INJECTED], indirect=True, ids=["injection"])
async def test_each_prompt_has_the_scripted_shape_and_the_injection_is_request_only(
    live: Live,
) -> None:
    for number in (1, 2):
        answer = await live.session.execute(prompt(number))
        assert len(answer) == ANSWER_CHARS
    exchanges = live.provider.exchanges
    assert [x.tool_calls for x in exchanges] == [2, 2, 0, 2, 2, 0]
    history = await live.context.get_messages()
    sizes = [len(m["content"]) for m in history if m["role"] == "tool"]
    assert sizes == list(SIZES)[: len(sizes)] and len(sizes) == 8
    assert all(4_000 <= s <= 12_000 for s in SIZES)
    assert not any("system-reminder" in str(m.get("content")) for m in history)
    for x in exchanges:
        last = x.messages[-1]
        assert last["metadata"] == {"source": "hook"} and len(last["content"]) == 6_400
        assert 1_900 <= estimate_message_tokens(last) <= 2_100
    for record in live.orchestrator.requests:
        assert "system-reminder" not in json.dumps(record.view)
