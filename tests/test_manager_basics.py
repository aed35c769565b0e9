"""The manager's protocol methods, without compaction pressure."""

from __future__ import annotations

import logging
import re
from types import SimpleNamespace
from typing import Any

import pytest
from amplifier_core.testing import MockCoordinator

import amplifier_module_context_simple as package
from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
    mount,
)

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


async def test_add_message_stores_a_new_dict_with_a_timestamp() -> None:
    manager = SimpleContextManager()
    original = {"role": "user", "content": "hi", "metadata": {"source": "cli"}}
    await manager.add_message(original)
    stored = (await manager.get_messages())[0]
    assert original == {"role": "user", "content": "hi", "metadata": {"source": "cli"}}
    assert stored is not original
    assert stored["metadata"]["source"] == "cli"
    assert TIMESTAMP.match(stored["metadata"]["timestamp"])


async def test_existing_timestamp_is_kept() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "hi", "metadata": {"timestamp": "T0"}})
    assert (await manager.get_messages())[0]["metadata"]["timestamp"] == "T0"


async def test_malformed_message_leaves_history_as_it_was() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "kept"})
    before = await manager.get_messages()
    with pytest.raises(ValueError, match="role"):
        await manager.add_message({"role": "wizard", "content": "x"})
    with pytest.raises(TypeError):
        await manager.add_message("not a dict")  # type: ignore[arg-type]
    assert await manager.get_messages() == before


async def test_unpaired_messages_are_admitted_and_views_stay_valid() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    await manager.add_message({"role": "tool", "tool_call_id": "ghost", "content": "orphan"})
    await manager.add_message({"role": "tool", "content": "no id at all"})
    view = await manager.get_messages_for_request()
    assert len(await manager.get_messages()) == 3
    assert check_view(view) == []


async def test_set_messages_is_all_or_nothing() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "old"})
    with pytest.raises(ValueError, match="message #1"):
        await manager.set_messages([{"role": "user", "content": "a"}, {"content": "no role"}])
    assert [m["content"] for m in await manager.get_messages()] == ["old"]
    await manager.set_messages(
        [
            {"role": "user", "content": "a", "metadata": {"timestamp": "T1"}},
            {"role": "assistant", "content": "b"},
        ]
    )
    stored = await manager.get_messages()
    assert [m["content"] for m in stored] == ["a", "b"]
    assert stored[0]["metadata"]["timestamp"] == "T1"


async def test_clear_empties_everything() -> None:
    manager = SimpleContextManager(max_tokens=2_000)
    for i in range(30):
        await manager.add_message({"role": "user", "content": f"prompt {i} " + "x" * 400})
    await manager.get_messages_for_request()
    await manager.clear()
    assert await manager.get_messages() == []
    assert manager.compaction_level == 0
    assert manager.token_meter_stats is None
    assert await manager.get_messages_for_request() == []


async def test_views_are_new_lists_without_internal_keys() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "hi"})
    first = await manager.get_messages_for_request()
    second = await manager.get_messages_for_request(None, None)  # positional form
    assert first == second and first is not second
    first.append({"role": "user", "content": "caller's own"})
    assert len(await manager.get_messages()) == 1
    assert set(second[0]) == {"role", "content", "metadata"}


async def test_system_prompt_factory_runs_once_per_request_and_keeps_hook_systems() -> None:
    manager = SimpleContextManager()
    calls: list[int] = []

    async def factory() -> str:
        calls.append(1)
        return "dynamic system prompt"

    await manager.add_message({"role": "system", "content": "static"})
    await manager.add_message(
        {"role": "system", "content": "from hook", "metadata": {"source": "hook"}}
    )
    await manager.add_message({"role": "user", "content": "hi"})
    await manager.set_system_prompt_factory(factory)
    view = await manager.get_messages_for_request()
    assert calls == [1]
    assert [m["content"] for m in view] == ["dynamic system prompt", "from hook", "hi"]
    await manager.get_messages_for_request()
    assert calls == [1, 1]


async def test_content_none_is_made_provider_safe_in_the_view_only() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    await manager.add_message(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    await manager.add_message({"role": "tool", "tool_call_id": "a", "content": "done"})
    view = await manager.get_messages_for_request()
    assert view[1]["content"] == ""
    assert (await manager.get_messages())[1]["content"] is None


def test_public_surface_is_exactly_all() -> None:
    public = {name for name in dir(package) if not name.startswith("_")}
    modules = {"annotations"}  # from __future__ import
    assert set(package.__all__) == public - modules - {
        n for n in public if type(getattr(package, n)).__name__ == "module"
    }
    assert package.__amplifier_module_type__ == "context"


# --- mount --------------------------------------------------------------------------------


async def test_mount_on_a_real_coordinator_registers_and_cleans_up() -> None:
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"token_meter": "actual"})
    manager = coordinator.mount_points["context"]
    assert isinstance(manager, SimpleContextManager)
    assert coordinator.hooks.list_handlers().get("llm:response") == ["context-simple-meter"]
    # The host records the mount under this module's name.
    assert coordinator.mount_history[-1]["name"] == "context-simple"
    assert coordinator.get_capability("context.foreground_usage") == manager.claim_foreground_usage
    retaining = coordinator.get_capability("context.request_retention")
    assert retaining == manager.get_messages_for_request_retaining
    measured = coordinator.get_capability("context.measured_request_view")
    assert measured == manager.get_measured_request_view
    events = await coordinator.collect_contributions("observability.events")
    assert ["context:budget" in e for e in events] == [True]
    await cleanup()
    assert not coordinator.hooks.list_handlers().get("llm:response")


async def test_the_measured_request_path_is_offered_only_with_the_actual_meter() -> None:
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"token_meter": "estimate"})
    manager = coordinator.mount_points["context"]
    assert coordinator.get_capability("context.measured_request_view") is None
    retaining = coordinator.get_capability("context.request_retention")
    assert retaining == manager.get_messages_for_request_retaining
    await cleanup()


async def test_mount_registers_its_hooks_by_name_and_the_meter_at_its_priority() -> None:
    coordinator = MockCoordinator()

    async def other(event: str, data: dict[str, Any]) -> None:
        return None

    coordinator.hooks.register("llm:response", other, priority=10, name="before")
    coordinator.hooks.register("llm:response", other, priority=90, name="after")
    cleanup = await mount(coordinator, {})
    handlers = coordinator.hooks.list_handlers()
    # The registry runs handlers in priority order: the meter at 50 sits between the two.
    assert handlers["llm:response"] == ["before", "context-simple-meter", "after"]
    for event in ("provider:thinking_blocks_dropped", "provider:thinking_binding_retry"):
        assert handlers[event] == [f"context-simple-thinking-{event}"]
    await cleanup()
    assert coordinator.hooks.list_handlers()["llm:response"] == ["before", "after"]


async def test_cleanup_awaits_what_an_undo_step_returns_and_logs_one_that_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    undone: list[str] = []

    async def undo_async() -> None:
        undone.append("async")

    def undo_failing() -> None:
        raise RuntimeError("already gone")

    steps = iter([undo_async, undo_failing, lambda: undone.append("sync")])
    mounted: dict[str, Any] = {}

    async def mount_point(point: str, module: Any, name: str | None = None) -> None:
        mounted[point] = module

    hooks = SimpleNamespace(register=lambda *args, **kwargs: next(steps))
    coordinator = SimpleNamespace(mount=mount_point, hooks=hooks)
    cleanup = await mount(coordinator, None)
    caplog.set_level(logging.DEBUG, logger="amplifier_module_context_simple")
    await cleanup()
    # Undone in reverse order; the failing step is logged with its traceback, and the rest run.
    assert undone == ["sync", "async"]
    [failed] = [
        r for r in caplog.records if r.getMessage() == "context-simple: cleanup step failed"
    ]
    assert failed.exc_info is not None and "already gone" in str(failed.exc_info[1])


async def test_mount_twice_is_harmless() -> None:
    first, second = MockCoordinator(), MockCoordinator()
    cleanup_a = await mount(first, {})
    cleanup_b = await mount(second, {})
    await cleanup_a()
    assert second.hooks.list_handlers().get("llm:response") == ["context-simple-meter"]
    await cleanup_b()


async def test_mount_works_without_hooks_or_capabilities() -> None:
    mounted: dict[str, Any] = {}

    async def mount_point(name: str, module: Any, name_: str | None = None, **_: Any) -> None:
        mounted[name] = module

    bare = SimpleNamespace(mount=lambda point, module, name=None: mount_point(point, module))
    cleanup = await mount(bare, None)
    assert isinstance(mounted["context"], SimpleContextManager)
    await cleanup()


def test_an_unknown_attribute_is_refused_naming_the_class_and_the_name() -> None:
    with pytest.raises(
        AttributeError, match=r"^'SimpleContextManager' object has no attribute 'nope'$"
    ):
        SimpleContextManager().nope  # noqa: B018


async def test_mount_rejects_bad_config_naming_the_key() -> None:
    with pytest.raises(ValueError, match="compact_threshold"):
        await mount(MockCoordinator(), {"compact_threshold": 7})


async def test_a_system_prompt_that_grows_is_counted_at_its_new_size() -> None:
    rules = "Follow the house rules on naming, tests and commits. " * 150
    texts = iter(["Be brief.", rules, rules])
    manager = SimpleContextManager()
    await manager.set_system_prompt_factory(lambda: next(texts))
    for turn in range(12):
        await manager.add_message({"role": "user", "content": f"question {turn} " + "word " * 60})
        await manager.add_message(
            {"role": "assistant", "content": f"answer {turn} " + "word " * 60}
        )
    budget = 4_000
    short = await manager.get_messages_for_request(token_budget=budget)
    assert len(short) == len(manager.messages) + 1  # everything fits beside the short prompt
    grown = await manager.get_messages_for_request(token_budget=budget)
    assert grown[0]["content"] == rules
    assert sum(estimate_message_tokens(m) for m in grown) <= budget
    assert len(grown) < len(short)


async def test_views_share_the_factory_system_message_while_its_text_is_unchanged() -> None:
    # A caller that compares views by identity (the replay's linear checks, a prefix cache)
    # must see consecutive views extend each other, the system prompt included.
    texts = iter(["You are careful.", "You are careful.", "You are brief."])
    manager = SimpleContextManager()
    await manager.set_system_prompt_factory(lambda: next(texts))
    await manager.add_message({"role": "user", "content": "hi"})
    first = await manager.get_messages_for_request()
    await manager.add_message({"role": "assistant", "content": "hello"})
    second = await manager.get_messages_for_request()
    third = await manager.get_messages_for_request()
    assert second[0] is first[0] and first[0]["content"] == "You are careful."
    assert third[0] is not second[0] and third[0] == {
        "role": "system",
        "content": "You are brief.",
        "metadata": {"source": "system-prompt-factory"},  # check_view knows what it replaces
    }


async def test_a_factory_that_returns_no_string_is_refused_naming_what_it_returned() -> None:
    manager = SimpleContextManager()
    await manager.set_system_prompt_factory(lambda: None)
    await manager.add_message({"role": "user", "content": "hi"})
    with pytest.raises(TypeError) as refused:
        await manager.get_messages_for_request()
    assert str(refused.value) == (
        "the system prompt factory must return a string, it returned NoneType: None"
    )
