"""Budget events, estimator families, ingress events and the meter, through the manager."""

from __future__ import annotations

from typing import Any

from amplifier_core.testing import MockCoordinator

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens, mount

from ..conftest import Recorder


class Info:
    def __init__(self, window: int, output: int, model: str | None = None) -> None:
        self.defaults: dict[str, Any] = {"context_window": window, "max_output_tokens": output}
        if model:
            self.defaults["model"] = model


class Provider:
    def __init__(self, window: int = 200_000, output: int = 64_000, model: str | None = None):
        self.info = Info(window, output, model)

    def get_info(self) -> Info:
        return self.info


async def test_budget_event_once_per_change_with_exact_keys() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    await manager.add_message({"role": "user", "content": "hi"})
    provider = Provider()
    for _ in range(3):
        await manager.get_messages_for_request(provider=provider)
    [payload] = recorder.named("context:budget")
    assert payload == {
        "source": "provider_defaults",
        "context_window": 200_000,
        "max_output_tokens": 64_000,
        "requested_output": 64_000,
        "output_source": "max_output_tokens",
        "reserved_output": 64_000,
        "safety_margin": 4_096,
        "tool_definitions_tokens": 0,
        "tools_not_held_back": 0,
        "learned_overhead_tokens": 0,
        "derived_budget": 131_904,
        "max_tokens": None,
        "max_tokens_fallback": 200_000,
        "capped": False,
        "effective_budget": 131_904,
        "request_budget": 131_904,
    }
    await manager.get_messages_for_request(provider=Provider(1_048_576, 65_536))
    assert [p["effective_budget"] for p in recorder.named("context:budget")] == [131_904, 978_944]


async def test_cap_is_reported_when_it_bites() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder, max_tokens=500_000)
    await manager.add_message({"role": "user", "content": "hi"})
    await manager.get_messages_for_request(provider=Provider(1_048_576, 65_536))
    await manager.get_messages_for_request(provider=Provider(200_000, 64_000))
    first, second = recorder.named("context:budget")
    assert (first["effective_budget"], first["capped"]) == (500_000, True)
    assert (second["effective_budget"], second["capped"]) == (131_904, False)


async def test_estimator_family_follows_the_provider_model() -> None:
    text = {"role": "user", "content": "Please refactor the parser module " * 40}
    manager = SimpleContextManager()
    await manager.add_message(text)
    await manager.get_messages_for_request(provider=Provider(model="gpt-4o"))
    stored = manager.messages[0]
    assert manager.token_meter_stats is not None
    assert manager.token_meter_stats["estimated"] == estimate_message_tokens(stored, family="o200k")
    await manager.get_messages_for_request(provider=Provider(model="claude-opus-4-7"))
    assert manager.token_meter_stats["estimated"] == estimate_message_tokens(
        stored, family="claude47"
    )
    await manager.get_messages_for_request()
    assert manager.token_meter_stats["estimated"] == estimate_message_tokens(stored)


async def test_token_family_config_overrides_the_model() -> None:
    manager = SimpleContextManager(token_family="claude3")
    await manager.add_message({"role": "user", "content": "word " * 100})
    await manager.get_messages_for_request(provider=Provider(model="gpt-4o"))
    assert manager.token_meter_stats is not None
    assert manager.token_meter_stats["estimated"] == estimate_message_tokens(
        manager.messages[0], family="claude3"
    )


async def test_ingress_event_after_storage_and_no_second_clip_on_resume() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder, max_tool_result_bytes=1_000)
    await manager.add_message({"role": "user", "content": "read it"})
    await manager.add_message(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "r", "tool": "read", "arguments": {}}],
        }
    )
    await manager.add_message(
        {"role": "tool", "tool_call_id": "r", "name": "read", "content": "é" * 5_000}
    )
    [event] = recorder.named("context:tool_result_ingress_truncated")
    assert event == {
        "tool_name": "read",
        "tool_call_id": "r",
        "original_text_utf8_bytes": 10_000,
        "stored_text_utf8_bytes": event["stored_text_utf8_bytes"],
        "max_tool_result_bytes": 1_000,
        "content_kind": "string",
    }
    stored = manager.messages[2]["content"]
    assert len(stored.encode()) == event["stored_text_utf8_bytes"] <= 1_000
    assert stored.count("original_text_utf8_bytes=10000") == 1
    await manager.set_messages(await manager.get_messages())
    assert len(recorder.named("context:tool_result_ingress_truncated")) == 1
    assert manager.messages[2]["content"] == stored


async def test_actual_meter_triggers_on_real_usage_through_the_host_registry() -> None:
    coordinator = MockCoordinator()
    await mount(coordinator, {"token_meter": "actual", "max_tokens": 10_000})
    manager: SimpleContextManager = coordinator.mount_points["context"]
    await manager.add_message({"role": "user", "content": "short"})
    await manager.get_messages_for_request()
    assert manager.compaction_level == 0
    await coordinator.hooks.emit(
        "llm:response",
        {"usage": {"input_tokens": 9_000, "cache_read_tokens": 8_000, "cache_write_tokens": 500}},
    )
    assert manager.meter.latest_reading == 9_500
    for i in range(6):
        await manager.add_message({"role": "assistant", "content": f"step {i} " * 300})
        await manager.add_message({"role": "user", "content": f"next {i}"})
    await manager.get_messages_for_request()
    stats = manager.token_meter_stats
    assert stats is not None
    assert (stats["source"], stats["measured"]) == ("actual", 9_500)
    assert stats["used"] >= 9_500
    assert manager.compaction_level > 0, "a real reading over the trigger compacts"


async def test_foreground_claim_wins_over_generic_readings() -> None:
    coordinator = MockCoordinator()
    await mount(coordinator, {"token_meter": "actual"})
    manager: SimpleContextManager = coordinator.mount_points["context"]
    claim = coordinator.get_capability("context.foreground_usage")
    record = claim()
    assert record(input_tokens=1_234, cache_write_tokens=6) is True
    await coordinator.hooks.emit("llm:response", {"usage": {"input_tokens": 99}})
    assert manager.meter.latest_reading == 1_240
    assert record(input_tokens=-1) is False
