"""The subclass surface amplifier-module-context-persistent relies on (see DESIGN.md).

``FilePersistentContext`` below uses ``SimpleContextManager`` exactly the way that module
does: constructor keywords, its own ``add_message`` that never calls ours and appends a dict
with a top-level ``timestamp`` to ``self.messages`` and to a JSONL file, a fresh re-read of
that file into ``self.messages`` before every ``get_messages_for_request`` and
``get_messages`` (new dict objects every time, same order, append-only), a resume that
assigns ``self.messages`` from the file and ignores ``set_messages``, ``self._estimate_tokens``
on a list, ``self.max_tokens`` / ``self.compact_threshold``, and
``super().get_messages_for_request(token_budget, provider)`` called positionally.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from amplifier_core.message_models import Message

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

from .conftest import Recorder

MAX_TOKENS = 20_000
BIG = "compiled module_7 in 3.4s with 12 warnings\n" * 60  # ~1.2k tokens
SMALL = "ok: nothing to report"


class FilePersistentContext(SimpleContextManager):
    """A file-backed subclass shaped like amplifier-module-context-persistent."""

    def __init__(
        self,
        path: Path,
        *,
        max_tokens: int = MAX_TOKENS,
        compact_threshold: float = 0.92,
        target_usage: float = 0.50,
        protected_recent: float = 0.30,
        truncate_chars: int = 250,
        hooks: Any = None,
    ) -> None:
        super().__init__(
            max_tokens=max_tokens,
            compact_threshold=compact_threshold,
            target_usage=target_usage,
            protected_recent=protected_recent,
            truncate_chars=truncate_chars,
            hooks=hooks,
        )
        self.path = path
        self.reads = 0
        self.last_estimate = 0
        self.over_threshold = False
        if path.exists():  # resume: the file is the history
            self.messages = self.read_file()

    def read_file(self) -> list[dict[str, Any]]:
        self.reads += 1
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    async def add_message(self, message: dict[str, Any]) -> None:
        entry = {**message, "timestamp": datetime.now(UTC).isoformat()}
        self.messages.append(entry)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    async def get_messages_for_request(
        self, token_budget: int | None = None, provider: Any = None
    ) -> list[dict[str, Any]]:
        self.messages = self.read_file()
        self.last_estimate = self._estimate_tokens(self.messages)
        limit = self.max_tokens if self.max_tokens is not None else 200_000
        self.over_threshold = self.last_estimate > limit * self.compact_threshold
        return await super().get_messages_for_request(token_budget, provider)

    async def get_messages(self) -> list[dict[str, Any]]:
        self.messages = self.read_file()
        return await super().get_messages()

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        # The file is the source of truth: what the host hands over on resume is ignored.
        self.messages = self.read_file()

    async def clear(self) -> None:
        await super().clear()
        self.path.write_text("", encoding="utf-8")


# ------------------------------------------------------------------ workload


def call(ids: Sequence[str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "check the logs", "signature": "sig"},
            *(
                {"type": "tool_call", "id": i, "name": "bash", "input": {"cmd": "make"}}
                for i in ids
            ),
        ],
        "tool_calls": [{"id": i, "tool": "bash", "arguments": {"cmd": "make"}} for i in ids],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": "bash", "content": text}


async def add_turn(context: SimpleContextManager, tag: str, text: str, width: int = 2) -> None:
    ids = [f"{tag}_{k}" for k in range(width)]
    await context.add_message(call(ids))
    for call_id in ids:
        await context.add_message(result(call_id, text))


async def grow_until_compaction(context: FilePersistentContext, recorder: Recorder) -> int:
    """Add large turns, requesting a view after each, until one escalation happened."""
    await context.add_message({"role": "user", "content": "Fix the failing build please."})
    for turn in range(40):
        await add_turn(context, f"t{turn}", BIG)
        await context.get_messages_for_request()
        if recorder.named("context:compaction"):
            return turn
    raise AssertionError("no compaction after 40 large turns")


def dumps(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in messages]


def without_notice(view: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if view:
        metadata = view[-1].get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("source") == "context-compaction":
            return list(view[:-1])
    return list(view)


def assert_valid(view: list[dict[str, Any]], history: list[dict[str, Any]]) -> None:
    assert check_view(view, history=history) == []
    for message in view:
        Message(**message)


def payload(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the provider sees of a message, without storage-only keys."""
    keys = ("role", "content", "tool_calls", "tool_call_id", "name")
    return tuple(json.dumps(message.get(k), sort_keys=True) for k in keys)


# ------------------------------------------------------------------ the surface


async def test_constructor_keywords_and_attributes(tmp_path: Path) -> None:
    hooks = Recorder()
    context = FilePersistentContext(
        tmp_path / "t.jsonl",
        max_tokens=12_345,
        compact_threshold=0.8,
        target_usage=0.4,
        protected_recent=0.2,
        truncate_chars=111,
        hooks=hooks,
    )
    assert context.max_tokens == 12_345
    assert context.compact_threshold == 0.8
    assert context.target_usage == 0.4
    assert context.protected_recent == 0.2
    assert context.truncate_chars == 111
    assert context.hooks is hooks
    assert context.messages == []
    assert isinstance(context.messages, list)


async def test_estimate_tokens_takes_any_list_of_messages(tmp_path: Path) -> None:
    context = FilePersistentContext(tmp_path / "t.jsonl")
    assert context._estimate_tokens([]) == 0
    await add_turn(context, "a", BIG)
    await context.add_message({"role": "user", "content": "and now?"})
    stored = context.read_file()
    assert context._estimate_tokens(stored) == sum(estimate_message_tokens(m) for m in stored)
    # Messages that never went through any add_message count the same.
    fresh = json.loads(json.dumps(stored))
    assert context._estimate_tokens(fresh) == context._estimate_tokens(stored)


async def test_add_message_bypasses_ours_and_the_file_holds_plain_dicts(tmp_path: Path) -> None:
    context = FilePersistentContext(tmp_path / "t.jsonl")
    await context.add_message({"role": "user", "content": "hello"})
    await add_turn(context, "a", SMALL)
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert all("timestamp" in m and "metadata" not in m for m in lines)
    view = await context.get_messages_for_request()
    history = await context.get_messages()
    assert history == lines
    assert_valid(view, history)
    assert [payload(m) for m in view] == [payload(m) for m in lines]


async def test_the_request_path_reads_the_reassigned_messages_list(tmp_path: Path) -> None:
    """Every request sees freshly parsed dicts; nothing may depend on object identity."""
    context = FilePersistentContext(tmp_path / "t.jsonl")
    await context.add_message({"role": "user", "content": "hello"})
    await add_turn(context, "a", SMALL)
    first = await context.get_messages_for_request()
    identities = {id(m) for m in context.messages}
    second = await context.get_messages_for_request()
    assert identities.isdisjoint(id(m) for m in context.messages), "new objects each time"
    assert dumps(first) == dumps(second)
    await context.add_message({"role": "user", "content": "more"})
    third = await context.get_messages_for_request()
    assert dumps(third[: len(second)]) == dumps(second)
    assert third[-1]["content"] == "more"


async def test_compaction_happens_through_the_subclass(tmp_path: Path) -> None:
    hooks = Recorder()
    context = FilePersistentContext(tmp_path / "t.jsonl", hooks=hooks)
    await grow_until_compaction(context, hooks)
    assert context.over_threshold, "the subclass's own threshold check agrees"
    view = await context.get_messages_for_request()
    history = await context.get_messages()
    assert_valid(view, history)
    assert context._estimate_tokens(view) < context._estimate_tokens(history)
    assert context._estimate_tokens(view) <= MAX_TOKENS
    assert len(view) < len(history)
    (compaction,) = hooks.named("context:compaction")
    assert compaction["history_messages"] == len(history)
    assert compaction["after_tokens"] < compaction["before_tokens"]
    assert hooks.named("context:budget")[0]["effective_budget"] == MAX_TOKENS
    # The history (file and list) is untouched by compaction.
    on_disk = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(on_disk) == len(history)
    assert all(not any(k.startswith("_") for k in m) for m in history)


async def test_views_stay_sticky_across_requests_after_one_escalation(tmp_path: Path) -> None:
    hooks = Recorder()
    context = FilePersistentContext(tmp_path / "t.jsonl", hooks=hooks)
    await grow_until_compaction(context, hooks)
    anchor = without_notice(await context.get_messages_for_request())
    previous = anchor
    for turn in range(8):
        await add_turn(context, f"s{turn}", SMALL)
        view = await context.get_messages_for_request()
        assert_valid(view, await context.get_messages())
        assert dumps(view[: len(previous)]) == dumps(previous), f"request {turn} moved"
        assert dumps(view[: len(anchor)]) == dumps(anchor)
        previous = without_notice(view)
    assert len(hooks.named("context:compaction")) == 1, "no new escalation for small growth"


async def test_resume_from_the_file_in_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    first_hooks = Recorder()
    first = FilePersistentContext(path, hooks=first_hooks)
    await grow_until_compaction(first, first_hooks)
    history = await first.get_messages()
    first_view = await first.get_messages_for_request()

    hooks = Recorder()
    resumed = FilePersistentContext(path, hooks=hooks)
    assert resumed.messages == history, "resume assigns self.messages from the file"
    await resumed.set_messages([{"role": "user", "content": "ignored by the subclass"}])
    assert await resumed.get_messages() == history

    view = await resumed.get_messages_for_request()
    assert_valid(view, history)
    (compaction,) = hooks.named("context:compaction")
    assert resumed._estimate_tokens(view) <= MAX_TOKENS
    assert dumps(view) == dumps(first_view), "the same decisions as before the restart"

    # Compacts the same way as the plain manager given the same history by set_messages.
    plain_hooks = Recorder()
    plain = SimpleContextManager(max_tokens=MAX_TOKENS, hooks=plain_hooks)
    await plain.set_messages(json.loads(json.dumps(history)))
    plain_view = await plain.get_messages_for_request()
    (plain_compaction,) = plain_hooks.named("context:compaction")
    positions = ("removed_positions", "truncated_positions", "stubbed_positions")
    assert {k: compaction[k] for k in positions} == {k: plain_compaction[k] for k in positions}
    assert compaction["strategy_level"] == plain_compaction["strategy_level"]
    assert [payload(m) for m in view] == [payload(m) for m in plain_view]

    # And it keeps going: appends land in the same file, views stay sticky.
    before = without_notice(view)
    await add_turn(resumed, "r", SMALL)
    after = await resumed.get_messages_for_request()
    assert dumps(after[: len(before)]) == dumps(before)
    assert len(path.read_text().splitlines()) == len(history) + 3
    assert len(hooks.named("context:compaction")) == 1


class WindowProvider:
    """Publishes its window the way providers do (``get_info().defaults``)."""

    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": 30_000, "max_output_tokens": 8_000}}


async def test_budget_and_provider_are_passed_positionally(tmp_path: Path) -> None:
    hooks = Recorder()
    context = FilePersistentContext(tmp_path / "t.jsonl", hooks=hooks)
    await context.add_message({"role": "user", "content": "hello"})
    await context.get_messages_for_request(15_000, WindowProvider())
    await context.get_messages_for_request(None, WindowProvider())
    explicit, derived = hooks.named("context:budget")
    assert (explicit["source"], explicit["effective_budget"]) == ("explicit", 15_000)
    assert derived["source"] == "provider_defaults"
    # The whole max output is held back (what the provider asks for), and a sixteenth of a
    # window below 64K as the margin.
    assert derived["derived_budget"] == 30_000 - 8_000 - 30_000 // 16
    assert (derived["effective_budget"], derived["capped"]) == (MAX_TOKENS, True)


async def test_clear_through_super_forgets_the_history_and_its_decisions(tmp_path: Path) -> None:
    hooks = Recorder()
    context = FilePersistentContext(tmp_path / "t.jsonl", hooks=hooks)
    await grow_until_compaction(context, hooks)
    await context.clear()
    assert await context.get_messages() == []
    assert context.messages == []
    await context.add_message({"role": "user", "content": "start over"})
    await add_turn(context, "n", SMALL)
    view = await context.get_messages_for_request()
    history = await context.get_messages()
    assert_valid(view, history)
    assert [payload(m) for m in view] == [payload(m) for m in history], "no stale decisions"
