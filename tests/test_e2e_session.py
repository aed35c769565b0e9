"""End to end in a real amplifier-core session (the Rust kernel from PyPI, no mocks).

The mount plan loads this package from its source tree and three test modules from
``tests/e2e/modules`` through a module-source resolver (see ``tests/e2e/sources.py`` for how
the kernel's loader uses it). A scripted provider with a small window drives a long session of
parallel tool calls with large outputs; the provider refuses any request with broken tool
pairing or over its window, exactly like a real API.
"""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from amplifier_core import AmplifierSession, HookRegistry, HookResult
from amplifier_core.message_models import Message

import amplifier_module_context_simple
from amplifier_module_context_simple import SimpleContextManager, check_view

from .e2e.sources import REPO_ROOT, LocalSourceResolver, mount_plan

WINDOW = 24_000
MAX_OUTPUT = 4_096
TURNS_PER_PROMPT = 12
PROMPTS = (
    "Build the project and collect the compiler output.",
    "Now run every test suite and report the slow ones.",
    "Finally package the release artifacts and list them.",
)
SYSTEM_PROMPT = "You are a careful build agent. Use the echo tool to run each step."
RECORDED = (
    "context:compaction",
    "context:pre_compact",
    "context:post_compact",
    "context:budget",
    "llm:request",
    "llm:response",
)


@dataclass
class SessionRun:
    """Everything a finished (or failed) session left behind."""

    context: Any
    orchestrator: Any
    provider: Any
    tool: Any
    resolver: LocalSourceResolver
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    handlers: dict[str, list[str]] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def named(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == event]


async def run_session(
    *,
    token_meter: str,
    prompts: Sequence[str] = PROMPTS,
    sizes: Sequence[int] | None = None,
    context_config: Mapping[str, Any] | None = None,
    framing_tokens: int | None = None,
    window: int = WINDOW,
    turns_per_prompt: int = TURNS_PER_PROMPT,
) -> SessionRun:
    provider_config: dict[str, Any] = {
        "context_window": window,
        "max_output_tokens": MAX_OUTPUT,
        "turns_per_prompt": turns_per_prompt,
    }
    if sizes is not None:
        provider_config["sizes"] = list(sizes)
    if framing_tokens is not None:
        provider_config["framing_tokens"] = framing_tokens
    plan = mount_plan(
        context_config={**(context_config or {}), "token_meter": token_meter},
        provider_config=provider_config,
    )
    session = AmplifierSession(plan)
    resolver = LocalSourceResolver()
    await session.coordinator.mount("module-source-resolver", resolver)
    events: list[tuple[str, dict[str, Any]]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        events.append((event, data))
        return HookResult(action="continue")

    for name in RECORDED:
        session.coordinator.hooks.register(name, record, name=f"e2e-recorder-{name}")
    try:
        await session.initialize()
        coordinator = session.coordinator
        run = SessionRun(
            context=coordinator.get("context"),
            orchestrator=coordinator.get("orchestrator"),
            provider=coordinator.get("providers")["scripted"],
            tool=coordinator.get("tools")["echo"],
            resolver=resolver,
            events=events,
            handlers=dict(coordinator.hooks.list_handlers()),
            capabilities={
                name: coordinator.get_capability(name)
                for name in ("context.foreground_usage", "context.measured_request_view")
            },
        )
        await run.context.set_system_prompt_factory(lambda: SYSTEM_PROMPT)
        try:
            for prompt in prompts:
                run.outputs.append(await session.execute(prompt))
        except Exception as exc:  # the assertions below say what went wrong
            run.error = exc
        return run
    finally:
        await session.cleanup()


def dumps(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True)


def is_notice(message: Mapping[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("source") == "context-compaction"


def escalated_requests(run: SessionRun) -> list[bool]:
    """Per provider request: did a ``context:compaction`` precede it since the last one?"""
    flags: list[bool] = []
    pending = False
    for name, _ in run.events:
        if name == "context:compaction":
            pending = True
        elif name == "llm:request":
            flags.append(pending)
            pending = False
    return flags


def assert_completed(run: SessionRun) -> None:
    assert run.error is None, f"the session failed: {run.error!r}"
    assert run.provider.rejections == []
    assert len(run.outputs) == len(PROMPTS)


# ------------------------------------------------------------------ loading


async def test_the_kernel_loads_every_module_from_its_local_source(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="amplifier_core.loader")
    run = await run_session(
        token_meter="estimate", prompts=PROMPTS[:1], context_config={"truncate_chars": 321}
    )
    assert set(run.resolver.resolved) == {
        "loop-e2e",
        "context-simple",
        "provider-scripted",
        "tool-echo",
    }
    assert run.resolver.resolved["context-simple"] == REPO_ROOT
    assert isinstance(run.context, SimpleContextManager)
    assert Path(amplifier_module_context_simple.__file__).resolve().parent == (
        REPO_ROOT / "amplifier_module_context_simple"
    )
    for module_id in ("loop-e2e", "context-simple", "provider-scripted", "tool-echo"):
        assert f"[module:validated] {module_id} - PASSED" in caplog.text
        assert f"Loaded module '{module_id}' from filesystem" in caplog.text
    assert run.context.truncate_chars == 321, "the mount plan's config reached mount()"
    # mount() ran twice (the loader's validation pass on a mock, then for real): the real
    # registry holds the meter exactly once, and the capabilities point at this instance.
    assert run.handlers["llm:response"].count("context-simple-meter") == 1
    assert run.capabilities["context.foreground_usage"] == run.context.claim_foreground_usage
    assert run.capabilities["context.measured_request_view"] is None, "estimate mode"
    assert type(run.orchestrator).__module__ == "amplifier_module_loop_e2e"
    assert type(run.provider).__module__ == "amplifier_module_provider_scripted"
    assert run.error is None, f"the session failed: {run.error!r}"
    assert len(run.outputs) == 1


# ------------------------------------------------------------------ the long session


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_a_long_session_never_sends_an_invalid_or_oversized_request(
    token_meter: str,
) -> None:
    run = await run_session(token_meter=token_meter)
    assert_completed(run)
    exchanges = run.provider.exchanges
    assert len(exchanges) >= 30, "at least 30 turns"
    assert sum(1 for x in exchanges if x.tool_calls > 1) >= 10, "parallel calls"
    assert max(x.input_total for x in exchanges) + MAX_OUTPUT <= WINDOW


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_every_view_passes_check_view_against_its_history(token_meter: str) -> None:
    run = await run_session(token_meter=token_meter)
    records = run.orchestrator.requests
    assert records, "the orchestrator asked for views"
    for number, record in enumerate(records):
        assert check_view(record.view, history=record.history) == [], f"request {number}"
        for message in record.view:
            Message(**message)
        assert record.view[0] == {
            "role": "system",
            "content": SYSTEM_PROMPT,
            "metadata": {"source": "system-prompt-factory"},
        }
    assert_completed(run)


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_compaction_and_budget_events_reach_the_session_hooks(token_meter: str) -> None:
    run = await run_session(token_meter=token_meter)
    assert_completed(run)
    compactions = run.named("context:compaction")
    assert compactions, "a 24k window must compact this session"
    assert len(run.named("context:pre_compact")) == len(compactions)
    assert len(run.named("context:post_compact")) == len(compactions)
    budgets = run.named("context:budget")
    in_force = {b["effective_budget"] - 800 for b in budgets}
    for payload in compactions:
        assert payload["after_tokens"] < payload["before_tokens"]
        assert payload["budget"] in in_force
    # Emitted only when it changes: first on the provider's window with the echo tool's
    # definition held back, then once the first reading shows the provider's own framing.
    assert 1 < len(budgets) <= 3
    assert all(a != b for a, b in itertools.pairwise(budgets))
    first, last = budgets[0], budgets[-1]
    assert first["source"] == "provider_defaults"
    assert first["context_window"] == WINDOW
    assert first["max_output_tokens"] == MAX_OUTPUT
    assert first["reserved_output"] == MAX_OUTPUT, "the whole output the provider asks for"
    assert first["tool_definitions_tokens"] > 0, "the mounted echo tool is held back"
    assert first["learned_overhead_tokens"] == 0, "nothing is learned before a reading"
    assert last["learned_overhead_tokens"] >= 400, "the provider's 400-token framing"
    # The kernel adds its default fields to every event: it went through the real registry.
    assert budgets[0]["session_id"] == compactions[0]["session_id"]


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_the_history_stays_complete(token_meter: str) -> None:
    run = await run_session(token_meter=token_meter)
    assert_completed(run)
    history = await run.context.get_messages()
    exchanges = run.provider.exchanges
    calls = sum(x.tool_calls for x in exchanges)
    assert len(history) == len(PROMPTS) + len(exchanges) + calls
    assert [m["content"] for m in history if m["role"] == "user"] == list(PROMPTS)
    results = [m for m in history if m["role"] == "tool"]
    assert len(results) == calls == run.tool.calls
    requested = {
        call["id"]: call["arguments"]["size"] for m in history for call in m.get("tool_calls") or []
    }
    assert {m["tool_call_id"]: len(m["content"]) for m in results} == requested
    assert max(requested.values()) == max(run.provider.sizes), "large outputs stay in full"
    assert all(not any(k.startswith("_") for k in m) for m in history)


@pytest.mark.parametrize("placement", ["in_place", "tail"])
@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_views_are_sticky_between_escalations(token_meter: str, placement: str) -> None:
    """Without a new escalation the previous view is a byte-identical prefix of the next:
    the whole previous request with the notice in place; all of it but the notice at the tail."""
    config = {"compaction_notice_placement": placement}
    run = await run_session(token_meter=token_meter, context_config=config)
    assert_completed(run)
    views = [x.messages for x in run.provider.exchanges]
    escalated = escalated_requests(run)
    assert len(escalated) == len(views)
    checked = 0
    for number in range(1, len(views)):
        if escalated[number]:
            continue
        previous = views[number - 1]
        if placement == "tail" and previous and is_notice(previous[-1]):
            previous = previous[:-1]
        current = views[number]
        assert [dumps(m) for m in current[: len(previous)]] == [dumps(m) for m in previous], (
            f"request {number} rewrote the prefix without an escalation"
        )
        checked += 1
    assert checked >= 20


def exact_prefix_requests(run: SessionRun) -> tuple[int, int]:
    """(requests that start with the whole previous request, requests after an escalation)."""
    exchanges = run.provider.exchanges
    escalated = escalated_requests(run)
    whole = sum(
        1
        for number in range(1, len(exchanges))
        if exchanges[number].prefix_messages == len(exchanges[number - 1].messages)
    )
    return whole, sum(escalated[1:])


@pytest.mark.parametrize("token_meter", ["estimate", "actual"])
async def test_every_request_between_escalations_starts_with_the_previous_one(
    token_meter: str,
) -> None:
    """The issue's session shape: a 12k window and 20 turns of tool work, default config."""
    shape = {"window": 12_000, "turns_per_prompt": 7, "token_meter": token_meter}
    run = await run_session(**shape)
    assert_completed(run)
    exchanges = run.provider.exchanges
    assert len(exchanges) >= 20
    whole, escalations = exact_prefix_requests(run)
    assert escalations >= 3, "the window is small enough to compact several times"
    assert whole == len(exchanges) - 1 - escalations, "every other request extends the last"
    quiet = await run_session(**shape, context_config={"compaction_notice_enabled": False})
    assert_completed(quiet)
    assert escalations <= exact_prefix_requests(quiet)[1] + 1


async def test_the_actual_meter_reads_the_provider_usage_through_the_kernel_hooks() -> None:
    run = await run_session(token_meter="actual")
    exchanges = run.provider.exchanges
    assert len(exchanges) >= 2
    assert run.context.meter.reading_count == len(exchanges)
    usage = run.named("llm:response")[-1]["usage"]
    assert set(usage) >= {"input_tokens", "cache_read_tokens", "cache_write_tokens"}
    assert run.context.meter.latest_reading == (usage["input_tokens"] + usage["cache_write_tokens"])
    assert run.context.meter.latest_reading == exchanges[-1].input_total
    stats = run.context.token_meter_stats
    assert stats is not None and stats["mode"] == "actual" and stats["source"] == "actual"
    # One-call lag: the latest view was planned on the reading of the request before it.
    before_latest_view = len(run.orchestrator.requests) - 2
    assert stats["measured"] == exchanges[before_latest_view].input_total
    assert run.context.meter.calibration_ratio is not None
    assert any(x.cache_read and x.cache_write for x in exchanges), "cache fields were real"
    measured_view = run.capabilities["context.measured_request_view"]
    assert measured_view == run.context.get_measured_request_view, "offered in actual mode"


async def test_actual_meter_sizes_with_the_tool_overhead_the_provider_reports() -> None:
    """A few thousand tokens of tool definitions per request, which the context never holds.

    The provider reports them in every usage; the meter models them as overhead, the
    compaction events name them, and no request's real size leaves the budget.
    """
    framing = 3_000
    run = await run_session(token_meter="actual", framing_tokens=framing)
    assert_completed(run)
    budget = run.named("context:budget")[-1]
    assert budget["learned_overhead_tokens"] >= framing, "learned in actual mode too"
    compactions = run.named("context:compaction")
    assert compactions
    for payload in compactions:
        assert payload["overhead_tokens"] is not None
        assert abs(payload["overhead_tokens"] - framing) <= 50
        assert payload["measured_tokens"] >= 0.92 * payload["budget"]
    # The size model's overhead and the learned overhead are the same tokens: counted once,
    # the requests use the window (they would be far below it if counted twice).
    peak = max(x.input_total for x in run.provider.exchanges)
    assert peak + MAX_OUTPUT <= WINDOW
    assert peak > 0.8 * (WINDOW - MAX_OUTPUT - framing)
    estimate_run = await run_session(token_meter="estimate", framing_tokens=framing)
    assert all(p["measured_tokens"] is None for p in estimate_run.named("context:compaction"))


def _call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": call_id, "name": "echo", "input": {}}],
        "tool_calls": [{"id": call_id, "tool": "echo", "arguments": {}}],
    }


def _result(call_id: str, lines: int) -> dict[str, Any]:
    text = "compiled module_7 in 3.4s with 12 warnings\n" * lines
    return {"role": "tool", "tool_call_id": call_id, "name": "echo", "content": text}


async def test_actual_meter_compacts_when_new_tool_output_outgrows_the_last_reading() -> None:
    """The reading is one call old; growth the estimator already sees must still trigger.

    Through the kernel's own hook registry: a reading well under the trigger, then one turn
    whose tool output pushes the estimated view past the whole budget. The request must not
    go out over the budget just because the last measurement was small (the protected part -
    prompts and the five latest results - fits comfortably).
    """
    hooks = HookRegistry()
    manager = SimpleContextManager(max_tokens=20_000, token_meter="actual", hooks=hooks)
    hooks.register("llm:response", manager.meter.on_llm_response, name="meter")
    await manager.add_message({"role": "user", "content": "Collect the build logs."})
    for turn in range(8):
        await manager.add_message(_call(f"c{turn}"))
        await manager.add_message(_result(f"c{turn}", 75))
    view = await manager.get_messages_for_request()
    reading = manager._estimate_tokens(view)
    await hooks.emit("llm:response", {"usage": {"input_tokens": reading, "cache_write_tokens": 0}})
    assert manager.meter.latest_reading == reading
    usable = 20_000 - manager.compaction_notice_token_reserve
    assert reading < manager.compact_threshold * usable, "the last reading is under the trigger"

    await manager.add_message(_call("big"))
    await manager.add_message(_result("big", 450))
    await manager.add_message({"role": "user", "content": "Summarise them."})
    history = await manager.get_messages()
    assert manager._estimate_tokens(history) > 20_000, "the view would not fit any more"
    protected = history[:1] + history[-10:]
    assert manager._estimate_tokens(protected) < usable, "what must be kept does fit"

    view = await manager.get_messages_for_request()
    assert check_view(view, history=history) == []
    assert manager._estimate_tokens(view) <= 20_000


# ------------------------------------------------------------------ the host's own check


def test_the_host_validate_command_accepts_the_package() -> None:
    cli = Path(sys.executable).with_name("amplifier-core")
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "amplifier_core.cli"]
    done = subprocess.run(
        [*command, "validate", "context", str(REPO_ROOT / "amplifier_module_context_simple")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" in done.stdout
