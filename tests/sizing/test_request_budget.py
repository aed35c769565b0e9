"""The budget is the request: each part it holds back, on a real coordinator and hook registry.

The parts (``_budget``): the output the provider will ask for, the safety margin, the tool
definitions the coordinator has mounted, and the overhead the provider's readings show beyond
what the module can account for. Every part is reported in ``context:budget``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core import AmplifierSession
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.models import HookResult, ModelInfo, ProviderInfo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager, check_view, mount
from amplifier_module_context_simple.readings._meter import OVERHEAD_STEP
from amplifier_module_context_simple.sizing._budget import PROVIDER_WARNINGS
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    PROVIDER_WARNINGS.clear()


class Tool:
    """A mounted tool as the orchestrators read it (``name``, ``description``, schema)."""

    def __init__(self, name: str, words: int = 50) -> None:
        self.name = name
        self.description = " ".join(f"{name}-detail{i}" for i in range(words))
        self.input_schema = {"type": "object", "properties": {"path": {"type": "string"}}}


class AnthropicLike:
    """Publishes like Amplifier's Anthropic provider: the model's ``ModelInfo`` carries what
    it sends as ``defaults["max_tokens"]``; ``get_info().defaults`` says 4096 regardless."""

    def __init__(self, window: int = 200_000, output: int = 64_000) -> None:
        self.window, self.output = window, output

    async def get_model_info(self) -> ModelInfo:
        return ModelInfo(
            id="claude-sonnet-4-5",
            display_name="Sonnet",
            context_window=self.window,
            max_output_tokens=self.output,
            defaults={"max_tokens": self.output},
        )

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id="anthropic", display_name="Anthropic", defaults={"max_tokens": 4096})


class DefaultsOnly:
    """Publishes its window in ``get_info().defaults`` only (a local model's provider)."""

    def __init__(self, provider_id: str = "local", **defaults: Any) -> None:
        self.provider_id, self.defaults = provider_id, defaults

    def get_info(self) -> ProviderInfo:
        return ProviderInfo(id=self.provider_id, display_name="P", defaults=self.defaults)


async def mounted(config: dict[str, Any] | None = None) -> tuple[Any, SimpleContextManager, list]:
    """A manager mounted on a real kernel coordinator, with its budget events captured."""
    session = AmplifierSession({"session": {"orchestrator": "none", "context": "none"}})
    coordinator = session.coordinator
    budgets: list[dict[str, Any]] = []

    async def capture(event: str, data: dict[str, Any]) -> HookResult:
        budgets.append(data)
        return HookResult(action="continue")

    coordinator.hooks.register("context:budget", capture, name="capture-budget")
    await mount(coordinator, config or {})
    return coordinator, coordinator.get("context"), budgets


async def answer(coordinator: Any, tokens: int) -> None:
    """The provider's reading for the view just handed out, through the kernel's hooks."""
    usage = {"input_tokens": tokens, "cache_write_tokens": 0}
    await coordinator.hooks.emit("llm:response", {"usage": usage})


def estimate(view: Sequence[dict[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


# --- the output the provider asks for -----------------------------------------------------------


async def test_the_whole_output_the_anthropic_provider_sends_is_held_back() -> None:
    _, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike())
    [budget] = budgets
    assert (budget["requested_output"], budget["output_source"]) == (64_000, "model_defaults")
    assert budget["reserved_output"] == 64_000
    assert budget["effective_budget"] == 200_000 - 64_000 - 4_096


async def test_a_defaults_max_tokens_is_trusted_except_where_it_is_known_not_to_be_sent() -> None:
    figures = {"context_window": 272_000, "max_output_tokens": 128_000, "max_tokens": 16_384}
    _, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=DefaultsOnly("openai", **figures))
    await manager.get_messages_for_request(provider=DefaultsOnly("anthropic", **figures))
    sent, unsent = budgets
    assert (sent["reserved_output"], sent["output_source"]) == (16_384, "provider_defaults")
    assert (unsent["reserved_output"], unsent["output_source"]) == (128_000, "max_output_tokens")


async def test_model_defaults_that_are_an_object_are_read_like_a_mapping() -> None:
    """A provider may describe its model with plain objects: ``defaults.max_tokens`` is what
    it sends, read as the other figures are read, whether a key or an attribute."""

    class ObjectInfo:
        async def get_model_info(self) -> SimpleNamespace:
            defaults = SimpleNamespace(max_tokens=20_000)
            return SimpleNamespace(
                context_window=100_000, max_output_tokens=50_000, defaults=defaults
            )

    _, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=ObjectInfo())
    [budget] = budgets
    assert (budget["requested_output"], budget["output_source"]) == (20_000, "model_defaults")
    assert budget["reserved_output"] == 20_000


async def test_the_request_s_own_max_output_tokens_wins() -> None:
    _, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike(), max_output_tokens=8_000)
    await manager.get_messages_for_request_retaining(
        retain_contents=[], provider=AnthropicLike(), max_output_tokens=2_000
    )
    asked, retained = budgets
    assert (asked["reserved_output"], asked["output_source"]) == (8_000, "request")
    assert retained["reserved_output"] == 2_000


async def test_output_reserve_fraction_is_a_share_of_the_figure_the_provider_sends() -> None:
    _, manager, budgets = await mounted({"output_reserve_fraction": 0.25})
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike())
    assert budgets[0]["reserved_output"] == 16_000


@pytest.mark.parametrize(
    ("window", "output"),
    [(8_000, 8_000), (4_000, 1_000), (8_192, None), (16_000, 30_000), (3, 1)],
)
async def test_odd_windows_get_a_budget_inside_the_window_never_the_fallback(
    window: int, output: int | None
) -> None:
    figures: dict[str, Any] = {"context_window": window}
    if output is not None:
        figures["max_output_tokens"] = output
    _, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hi"})
    await manager.get_messages_for_request(provider=DefaultsOnly(**figures))
    [budget] = budgets
    assert budget["source"] == "provider_defaults"
    assert 0 < budget["effective_budget"] < window
    assert budget["effective_budget"] + budget["reserved_output"] + budget["safety_margin"] <= (
        window
    )
    if output is None:
        assert budget["output_source"] == "assumed"
        assert budget["reserved_output"] == window // 4


# --- tool definitions ------------------------------------------------------------------------


async def test_the_coordinator_s_mounted_tools_are_held_back_and_followed() -> None:
    coordinator, manager, budgets = await mounted()
    first = Tool("read_file", words=2_000)
    await coordinator.mount("tools", first, name=first.name)
    await manager.add_message({"role": "user", "content": "hello"})
    provider = AnthropicLike()
    await manager.get_messages_for_request(provider=provider)
    family = "claude3"  # claude-sonnet-4-5's tokenizer family
    alone = estimate_tool_definitions([first], family)
    assert alone > 2_000
    assert budgets[-1]["tool_definitions_tokens"] == alone
    assert budgets[-1]["effective_budget"] == 200_000 - 64_000 - 4_096 - alone

    second = Tool("delegate", words=5_000)
    await coordinator.mount("tools", second, name=second.name)
    await manager.get_messages_for_request(provider=provider)
    both = estimate_tool_definitions([first, second], family)
    assert budgets[-1]["tool_definitions_tokens"] == both > alone
    await coordinator.unmount("tools", "delegate")
    await manager.get_messages_for_request(provider=provider)
    assert budgets[-1]["tool_definitions_tokens"] == alone
    assert len(budgets) == 3, "one event per change of the mounted set"


async def test_the_tool_estimate_is_recomputed_only_when_the_set_changes() -> None:
    class Counting(Tool):
        reads = 0

        @property
        def description(self) -> str:  # type: ignore[override]
            Counting.reads += 1
            return "Reads a file. " * 100

        @description.setter
        def description(self, value: str) -> None:
            pass

    coordinator, manager, _ = await mounted()
    await coordinator.mount("tools", Counting("read"), name="read")
    await manager.add_message({"role": "user", "content": "hello"})
    for _ in range(5):
        await manager.get_messages_for_request(provider=AnthropicLike())
    assert Counting.reads == 1
    await coordinator.mount("tools", Tool("grep"), name="grep")
    await manager.get_messages_for_request(provider=AnthropicLike())
    assert Counting.reads == 2


async def test_without_a_coordinator_nothing_is_held_back_unless_told() -> None:
    recorder = _Recorder()
    manager = SimpleContextManager(hooks=recorder)
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike())
    tools = [{"name": "read", "description": "Reads. " * 500, "input_schema": {}}]
    manager.set_tool_definitions(tools)
    await manager.get_messages_for_request(provider=AnthropicLike())
    told = estimate_tool_definitions(tools, "claude3")
    none, given = recorder.budgets
    assert none["tool_definitions_tokens"] == 0
    assert given["tool_definitions_tokens"] == told
    assert given["effective_budget"] == none["effective_budget"] - told


async def test_an_explicit_budget_reports_the_tools_it_did_not_hold_back() -> None:
    recorder = _Recorder()
    manager = SimpleContextManager(hooks=recorder)
    tools = [{"name": "read", "description": "Reads. " * 500, "input_schema": {}}]
    manager.set_tool_definitions(tools)
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike())
    await manager.get_messages_for_request(token_budget=50_000, provider=AnthropicLike())
    held, explicit = recorder.budgets
    carried = held["tool_definitions_tokens"]
    assert carried > 0 and held["tools_not_held_back"] == 0
    assert explicit["source"] == "explicit"
    assert explicit["tool_definitions_tokens"] == 0
    assert explicit["tools_not_held_back"] == carried
    assert explicit["effective_budget"] == 50_000


class _Recorder:
    def __init__(self) -> None:
        self.budgets: list[dict[str, Any]] = []

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        if event == "context:budget":
            self.budgets.append(data)


# --- the learned overhead ----------------------------------------------------------------------


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_what_a_reading_shows_beyond_view_and_tools_is_held_back(token_meter: str) -> None:
    coordinator, manager, budgets = await mounted({"token_meter": token_meter})
    tool = Tool("read_file", words=1_000)
    await coordinator.mount("tools", tool, name=tool.name)
    await manager.add_message({"role": "user", "content": "hello"})
    provider = AnthropicLike()
    view = await manager.get_messages_for_request(provider=provider)
    tools = budgets[-1]["tool_definitions_tokens"]
    assert budgets[-1]["learned_overhead_tokens"] == 0, "nothing is learned before a reading"
    injected = 6_472  # the real session's hook injections per request
    seen = estimate(view) + tools + injected
    await answer(coordinator, seen)
    await manager.get_messages_for_request(provider=provider)
    learned = budgets[-1]["learned_overhead_tokens"]
    assert injected <= learned < injected + OVERHEAD_STEP
    assert learned % OVERHEAD_STEP == 0
    assert budgets[-1]["effective_budget"] == 200_000 - 64_000 - 4_096 - tools - learned


async def test_the_learned_overhead_is_never_negative_and_settles() -> None:
    coordinator, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    provider = AnthropicLike()
    view = await manager.get_messages_for_request(provider=provider)
    await answer(coordinator, 1)  # a reading below our own estimate of the view
    await manager.get_messages_for_request(provider=provider)
    assert budgets[-1]["learned_overhead_tokens"] == 0
    # A large excess, then readings a little lower: held; a much lower one: lowered.
    for excess, held in ((5_000, 5_120), (4_900, 5_120), (4_700, 5_120), (1_000, 1_024)):
        await answer(coordinator, estimate(view) + excess)
        view = await manager.get_messages_for_request(provider=provider)
        assert budgets[-1]["learned_overhead_tokens"] == held, excess
    assert len(budgets) == 3, "the first budget, then the two held figures"


async def test_the_learned_overhead_is_bounded_by_the_window() -> None:
    coordinator, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    provider = DefaultsOnly(context_window=16_000, max_output_tokens=2_000)
    for _ in range(2):  # the first is not believed; the second confirms it
        await manager.get_messages_for_request(provider=provider)
        await answer(coordinator, 10**9)
    await manager.get_messages_for_request(provider=provider)
    assert budgets[-1]["learned_overhead_tokens"] == 16_000
    assert budgets[-1]["effective_budget"] == 1


# --- when the overhead alone leaves no room ----------------------------------------------------


async def test_tools_larger_than_the_window_warn_once_and_hard_fit_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coordinator, manager, budgets = await mounted()
    big = Tool("delegate", words=12_000)
    await coordinator.mount("tools", big, name=big.name)
    await manager.add_message({"role": "user", "content": "hello"})
    provider = DefaultsOnly(context_window=16_000, max_output_tokens=2_000)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await manager.get_messages_for_request(provider=provider)
    warned = [r.getMessage() for r in caplog.records if "no view can fit" in r.getMessage()]
    assert len(warned) == 1
    tools = budgets[-1]["tool_definitions_tokens"]
    assert tools > 16_000
    assert budgets[-1]["effective_budget"] == 1
    assert budgets[-1]["request_budget"] == 16_000 - 2_000 - 1_000, "the input room, no more"
    assert f"{tools:,} for tool definitions" in warned[0] and "16,000-token window" in warned[0]
    with pytest.raises(ContextLengthError, match="tool definitions"):
        await manager.get_messages_for_request_retaining(
            retain_contents=[], provider=provider, hard_fit=True
        )
    with pytest.raises(ContextLengthError, match="tool definitions"):
        await manager.get_messages_for_request_retaining(retain_contents=[], provider=provider)


# --- the invariant -----------------------------------------------------------------------------


def _history(turns: int, result_chars: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Start the task."}]
    for t in range(turns):
        call_id = f"call_{t}"
        history += [
            {
                "role": "assistant",
                "content": f"Reading part {t}.",
                "tool_calls": [{"id": call_id, "tool": "read", "arguments": {"part": t}}],
            },
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": "read",
                "content": f"line {t} of the log, with numbers {t * 7}\n" * (result_chars // 40),
            },
            {"role": "assistant", "content": f"Part {t} read."},
            {"role": "user", "content": f"Go on with part {t + 1}."},
        ]
    return history


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    window=st.integers(8_000, 1_000_000),
    output_share=st.floats(0.01, 0.5),
    tool_share=st.floats(0.0, 0.4),
    injected_share=st.floats(0.0, 0.2),
    turns=st.integers(1, 40),
    result_chars=st.integers(100, 20_000),
    token_meter=st.sampled_from(["estimate", "actual"]),
)
async def test_view_tools_overhead_and_output_fit_the_window_whenever_the_floor_fits(
    window: int,
    output_share: float,
    tool_share: float,
    injected_share: float,
    turns: int,
    result_chars: int,
    token_meter: str,
) -> None:
    output = max(1, int(window * output_share))
    tool_words = int(window * tool_share / 3)
    injected = int(window * injected_share)
    coordinator, manager, budgets = await mounted({"token_meter": token_meter})
    if tool_words:
        await coordinator.mount("tools", Tool("big", words=tool_words), name="big")
    provider = DefaultsOnly(context_window=window, max_output_tokens=output)
    history = _history(turns, result_chars)
    for message in history:
        await manager.add_message(message)
        if message["role"] != "user":
            continue
        view = await manager.get_messages_for_request(provider=provider)
        tools = budgets[-1]["tool_definitions_tokens"]
        await answer(coordinator, estimate(view) + tools + injected)
    view = await manager.get_messages_for_request(provider=provider)
    budget = budgets[-1]
    assert check_view(view, history=manager.messages) == []
    # The floor: the first and latest prompts, the latest round, the notice.
    floor = estimate(history[:1]) + estimate(history[-4:]) + 400
    if budget["effective_budget"] <= floor:
        return
    whole = estimate(view) + budget["tool_definitions_tokens"] + injected + output
    assert budget["learned_overhead_tokens"] >= injected
    assert whole <= window, json.dumps(budget)


# --- the tools are counted once ----------------------------------------------------------------


def _log_history(tokens: int) -> list[dict[str, Any]]:
    """A prompt and tool rounds of about ``tokens`` in all (each result ~2,000 tokens)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for t in range(max(1, tokens // 2_000)):
        history += _history(1, 6_000)[1:3]
        history[-2]["tool_calls"][0]["id"] = history[-1]["tool_call_id"] = f"log_{t}"
    return history


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_a_provider_reading_counts_the_tools_once(token_meter: str) -> None:
    """The real figure includes the tool definitions the budget held back: the trigger of
    ``actual`` compares it with the budget plus them, not with the budget alone."""
    coordinator, manager, budgets = await mounted({"token_meter": token_meter})
    bulky = Tool("delegate", words=9_000)
    await coordinator.mount("tools", bulky, name=bulky.name)
    provider = AnthropicLike()
    for message in _log_history(60_000):
        await manager.add_message(message)
    view = await manager.get_messages_for_request(provider=provider)
    budget = budgets[-1]
    tools = budget["tool_definitions_tokens"]
    assert tools > 25_000
    await answer(coordinator, estimate(view) + tools)  # what the provider counts: view + tools
    await manager.add_message({"role": "user", "content": "Summarise them."})
    view = await manager.get_messages_for_request(provider=provider)
    room = 200_000 - 64_000 - 4_096
    # View and tools together stay under the trigger of the whole input room, so nothing
    # compacts in either mode (counting the tools twice would compact here in actual mode).
    assert estimate(view) + tools < 0.92 * (room - 800)
    assert estimate(view) > 0.5 * (room - tools)
    assert manager.compaction_level == 0, budget


async def test_the_measured_path_compares_the_whole_request_count_with_the_whole_room() -> None:
    coordinator, manager, _ = await mounted({"token_meter": "actual"})
    bulky = Tool("delegate", words=9_000)
    await coordinator.mount("tools", bulky, name=bulky.name)
    provider = AnthropicLike()
    for message in _log_history(60_000):
        await manager.add_message(message)
    tools = estimate_tool_definitions([bulky], "claude3")

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = estimate(view) + tools  # the orchestrator counts its tools too
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": 200_000 - 64_000,
                "measurement": {"kind": "provider_count", "source": "t", "input_tokens": tokens},
            },
        }

    result = await manager.get_measured_request_view(
        provider=provider, retain_contents=[], count_view=count_view
    )
    room = 200_000 - 64_000 - 4_096
    assert result["measured_before"] < 0.92 * (room - 800)
    assert result["outcome"] == "not_needed", result


async def test_a_tool_replaced_by_another_of_the_same_count_is_estimated_again() -> None:
    coordinator, manager, budgets = await mounted()
    await coordinator.mount("tools", Tool("small", words=10), name="t")
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=AnthropicLike())
    await coordinator.mount("tools", Tool("large", words=3_000), name="t")
    await manager.get_messages_for_request(provider=AnthropicLike())
    small, large = (b["tool_definitions_tokens"] for b in budgets)
    assert large > small + 3_000


async def test_a_learned_overhead_that_crowds_the_view_out_is_warned_about_when_it_moves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coordinator, manager, budgets = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    provider = DefaultsOnly(context_window=64_000, max_output_tokens=4_000)
    room = 64_000 - 4_000 - 4_000

    def crowding() -> list[str]:
        return [r.getMessage() for r in caplog.records if "neither the view" in r.getMessage()]

    with caplog.at_level(logging.WARNING):
        view = await manager.get_messages_for_request(provider=provider)
        await answer(coordinator, estimate(view) + room // 4)  # a quarter of the room: fine
        view = await manager.get_messages_for_request(provider=provider)
        assert crowding() == []
        for _ in range(3):  # more than half of it, three times: one warning
            await answer(coordinator, estimate(view) + room * 6 // 10)
            view = await manager.get_messages_for_request(provider=provider)
        assert len(crowding()) == 1
        assert f"{budgets[-1]['learned_overhead_tokens']:,} of learned overhead" in crowding()[0]
        await answer(coordinator, estimate(view) + room * 9 // 10)  # moved by far more than 10%
        await manager.get_messages_for_request(provider=provider)
        assert len(crowding()) == 2


async def test_the_fallback_is_the_request_s_input_too_and_an_explicit_budget_is_the_view_s() -> (
    None
):
    coordinator, manager, budgets = await mounted()
    big = Tool("delegate", words=3_000)
    await coordinator.mount("tools", big, name=big.name)
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=DefaultsOnly(timeout=30))  # no window
    await manager.get_messages_for_request(provider=DefaultsOnly(timeout=30), token_budget=9_000)
    fallback, explicit = budgets
    tools = fallback["tool_definitions_tokens"]
    assert fallback["source"] == "max_tokens_fallback" and tools > 3_000
    assert fallback["effective_budget"] == 200_000 - tools
    assert fallback["request_budget"] == 200_000
    assert explicit["source"] == "explicit" and explicit["effective_budget"] == 9_000


async def test_without_a_provider_the_fallback_holds_the_known_tools_back() -> None:
    recorder = _Recorder()
    manager = SimpleContextManager(hooks=recorder)
    tools = [{"name": "read", "description": "Reads a file. " * 400, "input_schema": {}}]
    manager.set_tool_definitions(tools)
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request()
    [budget] = recorder.budgets
    assert budget["source"] == "max_tokens_fallback"
    assert budget["effective_budget"] == 200_000 - estimate_tool_definitions(tools, None)


def _raises() -> object:
    raise RuntimeError("the coordinator cannot list its tools")


# Named ids: a function's repr holds its address, which changes on every run, and a test id must
# not (mutmut keeps which tests reach which function by id between runs).
@pytest.mark.parametrize(
    "source",
    [lambda: 42, lambda: None, lambda: "read_file", _raises],
    ids=["number", "None", "string", "raises"],
)
async def test_a_tool_source_that_lists_nothing_usable_holds_nothing_back(
    source: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A source returning what is not a list of tools (or failing) must never fail a request.
    recorder = _Recorder()
    manager = SimpleContextManager(hooks=recorder)
    manager.set_tool_definitions(source)
    await manager.add_message({"role": "user", "content": "hello"})
    with caplog.at_level(logging.DEBUG, logger="amplifier_module_context_simple"):
        view = await manager.get_messages_for_request(provider=AnthropicLike())
    assert view[-1]["content"] == "hello"
    assert recorder.budgets[-1]["tool_definitions_tokens"] == 0
    failed = "context-simple: reading the mounted tools failed"
    assert (failed in caplog.messages) == (source is _raises)
