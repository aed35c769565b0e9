"""Context-trimming failures that broke real agent sessions: one named regression test each.

Numbering follows the reliability issue. Every view is checked with ``check_view`` against the
history, and every Amplifier-shaped view is also built into the host's ``Message`` model (the
orchestrator does that; a failure there aborts the turn). Anthropic- and OpenAI-shaped inputs
are checked with ``check_view`` only, since their blocks are not host blocks.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import random
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import Message

import amplifier_module_context_simple as package
from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.vocabulary._messages import is_human_prompt

from .conftest import CORPUS_DIR, Recorder

T = "2026-01-01T00:00:00.000Z"
BIG = "compiler output line that keeps going\n" * 100  # ~1.1k tokens
NOTICE_SOURCE = "context-compaction"


# --- message builders (Amplifier shape unless the name says otherwise) ---------------------


def meta() -> dict[str, Any]:
    return {"timestamp": T}


def prompt(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "metadata": meta()}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "metadata": meta()}


def call(ids: Sequence[str], *, thinking: str | None = None, blocks: bool = True) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{ids[0]}"})
    if blocks:
        content += [
            {"type": "tool_call", "id": i, "name": "bash", "input": {"cmd": i}} for i in ids
        ]
    return {
        "role": "assistant",
        "content": content or "",
        "tool_calls": [{"id": i, "tool": "bash", "arguments": {"cmd": i}} for i in ids],
        "metadata": meta(),
    }


def result(call_id: str, text: str = BIG) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "name": "bash",
        "content": text,
        "metadata": meta(),
    }


def anthropic_call(ids: Sequence[str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids],
    }


def anthropic_result(call_id: str, text: str = BIG) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
    }


def group(ids: Sequence[str], text: str = BIG, *, blocks: bool = True) -> list[dict[str, Any]]:
    return [call(ids, blocks=blocks), *(result(i, text) for i in ids)]


def reminder(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": text,
        "metadata": {"timestamp": T, "ephemeral": True, "persisted": True},
    }


# --- helpers --------------------------------------------------------------------------------


def assert_valid(
    view: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]], *, host: bool = True
) -> None:
    assert check_view(view, history=history) == []
    if host:
        for message in view:
            Message(**message)


async def fill(manager: SimpleContextManager, messages: Sequence[dict[str, Any]]) -> None:
    for message in messages:
        await manager.add_message(message)


async def valid_view(
    manager: SimpleContextManager, *, host: bool = True, **kwargs: Any
) -> list[dict[str, Any]]:
    view = await manager.get_messages_for_request(**kwargs)
    assert_valid(view, await manager.get_messages(), host=host)
    return view


def is_notice(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("source") == NOTICE_SOURCE


def tool_groups(history: Sequence[dict[str, Any]]) -> list[set[int]]:
    """Positions of each call message with its results (Amplifier shape, unique ids)."""
    owner: dict[str, int] = {}
    groups: dict[int, set[int]] = {}
    for position, message in enumerate(history):
        for tool_call in message.get("tool_calls") or []:
            owner[tool_call["id"]] = position
            groups.setdefault(position, {position})
        if message.get("role") == "tool":
            groups[owner[message["tool_call_id"]]].add(position)
    return list(groups.values())


def provider(window: int, output: int, model: str | None = None) -> Any:
    class Provider:
        async def get_model_info(self) -> dict[str, Any]:
            info: dict[str, Any] = {"context_window": window, "max_output_tokens": output}
            if model is not None:
                info["model"] = model
            return info

    return Provider()


# --- 1-9: pairing under trimming -------------------------------------------------------------


async def test_01_trim_edge_between_call_and_result_leaves_no_leading_orphan() -> None:
    history = [prompt("Fix the build."), *(m for t in range(20) for m in group([f"c{t}"]))]
    visible = len(history)
    edges_at_results = 0
    for count in range(1, visible, 2):  # odd counts: the recent window starts at a result
        start = visible - count
        assert history[start]["role"] == "tool"
        edges_at_results += 1
        manager = SimpleContextManager(
            max_tokens=9_000,
            protected_recent=(count - 0.5) / visible,
            protected_tool_results=0,
        )
        await fill(manager, history)
        view = await valid_view(manager)
        assert manager.compaction_level >= 1
        assert view[0] is manager.messages[0], "the task stays first"
        assert view[1]["role"] != "tool", "no result leads the kept window"
        for index, message in enumerate(view):
            if message["role"] == "tool":
                before = view[index - 1]
                assert before.get("tool_calls") or before["role"] == "tool"
    assert edges_at_results == 20


async def test_02_surviving_call_never_loses_its_result() -> None:
    # Anthropic shape: a tool_use whose tool_result was trimmed is a hard 400 there.
    history: list[dict[str, Any]] = [{"role": "user", "content": "Migrate the database."}]
    for t in range(18):
        history += [anthropic_call([f"u{t}"]), anthropic_result(f"u{t}")]
    for budget in range(4_000, 22_001, 1_500):
        for protected in (0.0, 0.2, 0.5):
            manager = SimpleContextManager(
                max_tokens=budget, protected_recent=protected, protected_tool_results=0
            )
            await fill(manager, history)
            view = await valid_view(manager, host=False)
            assert not any(m.get("_repaired") for m in view), "compaction never needs a repair"
            for index, message in enumerate(view):
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        answer = view[index + 1]["content"][0]
                        assert answer["tool_use_id"] == block["id"]


async def test_03_middle_removal_among_several_tool_groups_leaves_no_orphan() -> None:
    history: list[dict[str, Any]] = [prompt("Audit the service.")]
    for t in range(6):
        history += [say(f"looking at part {t}")]
        history += group([f"a{t}", f"b{t}"])
        history += group([f"c{t}"], "short output", blocks=False)
        history += group([f"d{t}", f"e{t}", f"f{t}"])
        if t == 2:
            history.append(reminder("<system-reminder>keep the audit log</system-reminder>"))
    groups = tool_groups(history)
    assert len(groups) == 18
    for budget in (7_000, 10_000, 14_000, 20_000):
        recorder = Recorder()
        manager = SimpleContextManager(max_tokens=budget, hooks=recorder)
        await fill(manager, history)
        view = await manager.get_messages_for_request_retaining(
            retain_contents=["<system-reminder>keep the audit log</system-reminder>"]
        )
        assert_valid(view, manager.messages)
        removed = manager.decisions.removed
        assert removed, "something in the middle went"
        assert any(p > 20 for p in removed) or budget >= 14_000
        for members in groups:
            gone = members & removed
            assert gone in (set(), members), f"group {sorted(members)} split: {sorted(gone)}"
        kept = [
            m
            for m in view
            if m.get("content") == "<system-reminder>keep the audit log</system-reminder>"
        ]
        assert len(kept) == 1, "the retained reminder in the middle stays"


async def test_04_three_parallel_results_cut_between_first_and_second() -> None:
    history: list[dict[str, Any]] = [prompt("Compare three configs.")]
    for t in range(10):
        history += group([f"f{t}"])
    batch_call = len(history)
    history += group(["p1", "p2", "p3"])  # call, r1, r2, r3
    for t in range(6):
        history += group([f"g{t}"], "ok")
    visible = len(history)
    start = batch_call + 2  # the recent window begins at r2: the cut is between r1 and r2
    count = visible - start
    batch = set(range(batch_call, batch_call + 4))
    for budget in (4_000, 6_000, 9_000):
        manager = SimpleContextManager(
            max_tokens=budget, protected_recent=(count - 0.5) / visible, protected_tool_results=0
        )
        await fill(manager, history)
        view = await valid_view(manager)
        removed = manager.decisions.removed
        assert removed, "everything older than the batch can go"
        # r2 and r3 are inside the protected window and r1 is not: the batch stays whole.
        assert not batch & removed
        ids = [m.get("tool_call_id") for m in view if m["role"] == "tool"]
        assert [i for i in ids if i in ("p1", "p2", "p3")] == ["p1", "p2", "p3"]


async def test_05_ten_parallel_calls_and_interleaved_results_of_two_calls() -> None:
    rng = random.Random(5)
    history: list[dict[str, Any]] = [prompt("Scan every package.")]
    for t in range(5):
        ids = [f"s{t}_{k}" for k in range(10)]
        history.append(call(ids))
        shuffled = ids[:]
        rng.shuffle(shuffled)
        history += [result(i, BIG[: 400 * (k + 1)]) for k, i in enumerate(shuffled)]
    # Results answering two different assistant turns, interleaved (a cancelled parallel run).
    history += [
        call(["a1", "a2"]),
        result("a1", "A one"),
        call(["b1", "b2"]),
        result("b1", "B one"),
        result("a2", "A two"),
        result("b2", "B two"),
        prompt("and now?"),
    ]
    for budget in (None, 30_000, 12_000, 7_000):
        manager = SimpleContextManager(max_tokens=budget or 200_000)
        await fill(manager, history)
        view = await valid_view(manager)
        order = [
            m["tool_calls"][0]["id"] if m.get("tool_calls") else m.get("tool_call_id")
            for m in view
            if m.get("tool_calls") or m["role"] == "tool"
        ]
        tail = [x for x in order if x and x[0] in "ab"]
        assert tail == ["a1", "a1", "a2", "b1", "b1", "b2"], tail
        for index, message in enumerate(view):
            if message.get("tool_calls") and len(message["tool_calls"]) == 10:
                answers = {m.get("tool_call_id") for m in view[index + 1 : index + 11]}
                assert answers == {c["id"] for c in message["tool_calls"]}


async def test_06_trigger_inside_a_parallel_batch_duplicates_nothing() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=14_000, hooks=recorder)
    await fill(
        manager, [prompt("Build all targets."), *(m for t in range(9) for m in group([f"c{t}"]))]
    )
    assert not recorder.named("context:compaction")
    ids = [f"p{k}" for k in range(4)]
    await manager.add_message(call(ids))
    views: list[list[dict[str, Any]]] = [await valid_view(manager)]
    for k, call_id in enumerate(ids):
        await manager.add_message(result(call_id))
        view = await valid_view(manager)
        views.append(view)
        if k < len(ids) - 1:
            assert view[-1 - k - 1].get("tool_calls"), "the open batch is the tail"
            assert not any(m.get("_repaired") for m in view)
            # A notice, if any, stands where the left-out span was, never inside the batch.
            assert not any(is_notice(m) for m in view[-k - 2 :])
    assert recorder.named("context:compaction"), "the trigger fired during the batch"
    for view in views:
        assert len({id(m) for m in view}) == len(view)
        answered = [m["tool_call_id"] for m in view if m["role"] == "tool"]
        assert len(answered) == len(set(answered)), "no result twice"
    assert sum(map(is_notice, views[-1])) == 1
    assert [m["tool_call_id"] for m in views[-1][-4:]] == ids, "the batch, answered, is last"


async def test_07_long_tool_loop_keeps_the_only_human_prompt() -> None:
    task = "Port the whole test-suite to the new runner, file by file. " * 12  # > stub size
    manager = SimpleContextManager(max_tokens=6_000)
    await manager.add_message(prompt(task))
    escalated = 0
    for t in range(300):
        await fill(manager, group([f"c{t}"], f"ported file {t}\n" + "ok\n" * 60))
        if t % 10 == 9:
            view = await valid_view(manager)
            escalated = manager.decisions.escalations
            assert view[0] is manager.messages[0]
            assert view[0]["content"] == task
    assert escalated >= 3
    assert len(manager.messages) == 601


async def test_08_damaged_history_is_repaired_in_the_view_only_and_not_for_good(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = [
        prompt("Deploy to staging."),
        call(["lost"]),  # cancelled run: no result was ever recorded
        prompt("what happened? continue"),
        say("Resuming."),
        result("ghost", "a result whose call is gone"),
        *group(["c2"], "deployed"),
        prompt("thanks"),
    ]
    manager = SimpleContextManager()
    await fill(manager, history)
    before = copy.deepcopy(await manager.get_messages())
    with caplog.at_level(logging.WARNING, logger="amplifier_module_context_simple"):
        view = await valid_view(manager)
        await valid_view(manager)
    assert await manager.get_messages() == before, "repair never touches history"
    # Reported: in the view (the placeholder is marked), on the manager, and once in the log.
    repairs = " ".join(manager.view_repairs)
    assert "'lost'" in repairs and "position 4" in repairs
    logged = [r.getMessage() for r in caplog.records if "position 4" in r.getMessage()]
    assert len(logged) == 1, "logged once per change, not once per request"
    filler = view[2]
    assert view[1]["tool_calls"][0]["id"] == "lost"
    assert filler["role"] == "tool" and filler["tool_call_id"] == "lost"
    assert filler["_repaired"] is True, "the repair is reported in the view"
    assert all(m.get("tool_call_id") != "ghost" for m in view), "orphan result left out"
    assert sum(bool(m.get("_repaired")) for m in view) == 1
    # The same history handed back (resume) gives the same view: nothing was baked in.
    twin = SimpleContextManager()
    await twin.set_messages(copy.deepcopy(before))
    assert json.dumps(await twin.get_messages_for_request()) == json.dumps(view)
    # A result that arrives late answers the call: the placeholder is gone for good.
    await manager.add_message(result("lost", "finally"))
    later = await valid_view(manager)
    assert not any(m.get("_repaired") for m in later)
    assert later[1]["tool_calls"][0]["id"] == "lost"
    assert later[2]["content"] == "finally"
    # A compaction that removes the damaged group removes its repair too.
    small = SimpleContextManager(max_tokens=2_500, protected_recent=0.2)
    await fill(small, [*history, *(m for t in range(6) for m in group([f"z{t}"], "x" * 900))])
    compacted = await valid_view(small)
    if 1 in small.decisions.removed:
        assert not any(m.get("_repaired") for m in compacted)
    # Nor is the damage a permanent cost: an old interrupted call does not make each later
    # request re-render the history after it (counted where the view builds each message).
    long = SimpleContextManager()
    await fill(long, history[:3])
    await fill(long, [m for t in range(1_000) for m in group([f"l{t}"], "ok", blocks=False)])
    await long.get_messages_for_request()
    rendered = long.planner.rendered_messages
    for t in range(10):
        await long.add_message(prompt(f"more {t}"))
        await long.get_messages_for_request()
    emitted = [long.planner.rendered_messages - rendered]
    assert emitted[0] <= 10 * 5, f"{emitted[0] / 10:.0f} messages rendered per request"


async def test_09_count_based_cut_right_after_a_call() -> None:
    history: list[dict[str, Any]] = [prompt("Rename the module.")]
    for t in range(12):
        history += group([f"x{t}", f"y{t}"])
    visible = len(history)
    for call_position in range(1, visible, 3):  # each call in turn sits right before the cut
        count = visible - call_position - 1
        manager = SimpleContextManager(
            max_tokens=10_000, protected_recent=(count - 0.5) / visible, protected_tool_results=0
        )
        await fill(manager, history)
        view = await valid_view(manager)
        assert view[1]["role"] != "tool"
    # The cut right after a trailing call whose results are still being produced.
    manager = SimpleContextManager(max_tokens=10_000, protected_recent=0.0)
    await fill(manager, [*history, call(["running"])])
    view = await valid_view(manager)
    assert view[-1]["tool_calls"][0]["id"] == "running", "the open call stays, last"
    assert not any(m.get("_repaired") for m in view), "no placeholder for a running call"


# --- 10-14: budgets, notices, events, cache stability ----------------------------------------


def state_of(manager: SimpleContextManager) -> tuple[Any, ...]:
    return (
        manager.decisions,
        manager.compaction_stats,
        manager.token_meter_stats,
        copy.deepcopy(manager.messages),
    )


async def test_10_protected_set_larger_than_budget_is_a_typed_error_without_state_change() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=3_000, hooks=recorder)
    await fill(manager, [prompt("spec " * 4_000), *group(["c0"], "ok"), say("working")])
    before = state_of(manager)
    with pytest.raises(ContextLengthError) as caught:
        await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert isinstance(caught.value, Exception), "catchable by an orchestrator's except Exception"
    assert state_of(manager) == before
    assert recorder.events == [], "a failed call emits nothing"
    # The ordinary path does not loop or storm: one escalation, then stable.
    for _ in range(5):
        view = await valid_view(manager)
    assert len(recorder.named("context:compaction")) <= 1
    assert view[0]["content"] == "spec " * 4_000


async def test_11_custom_provider_window_is_honoured_and_failures_are_catchable() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)  # no cap: the provider's window rules
    await fill(manager, [prompt("Go."), *(m for t in range(30) for m in group([f"c{t}"]))])
    custom = provider(32_000, 8_000)
    view = await valid_view(manager, provider=custom)
    [budget] = recorder.named("context:budget")
    assert budget["source"] == "provider_model_info"
    assert budget["effective_budget"] == 32_000 - 8_000 - 32_000 // 16
    [compaction] = recorder.named("context:compaction")
    assert compaction["budget"] == 32_000 - 8_000 - 32_000 // 16 - 800
    assert manager._estimate_tokens(view) <= budget["effective_budget"]

    class Broken:
        def get_model_info(self) -> None:
            raise RuntimeError("provider exploded")

        def get_info(self) -> object:
            return {"defaults": {"context_window": "huge", "max_output_tokens": -1}}

    fallback = SimpleContextManager(hooks=recorder)
    await fallback.add_message(prompt("hi"))
    assert await fallback.get_messages_for_request(provider=Broken())
    assert recorder.events[-1][1]["source"] == "max_tokens_fallback"
    for bad in (0, -5, "many", 1.5):
        with pytest.raises(ValueError, match="token_budget"):
            await fallback.get_messages_for_request(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compact_threshold"):
        SimpleContextManager(compact_threshold=7)
    request_path = [
        p
        for p in Path(package.__file__).parent.glob("*.py")
        if p.name not in ("cli.py", "__main__.py")  # the command line may exit; the module not
    ]
    source = "\n".join(p.read_text() for p in request_path)
    assert not re.search(r"\bsys\.exit\(|\bos\._exit\(|\bexit\(|\bquit\(", source)


async def test_12_after_compaction_the_kept_first_prompt_is_not_re_executed() -> None:
    for verbosity in ("minimal", "normal", "verbose"):
        manager = SimpleContextManager(max_tokens=12_000, compaction_notice_verbosity=verbosity)
        await fill(manager, [prompt("Create the release branch and tag v2.")])
        await fill(manager, [m for t in range(20) for m in group([f"c{t}"])])
        view = await valid_view(manager)
        [notice] = [m for m in view if is_notice(m)]
        assert notice["role"] == "user"
        assert view[0]["content"] == "Create the release branch and tag v2."
        assert view[1] is notice, "where the left-out span began, right after the first prompt"
        text = notice["content"]
        assert "may already be done" in text
        assert "do not redo state-changing actions" in text
        assert not is_human_prompt(notice), "the notice never counts as a new request"
        await manager.add_message(prompt("status?"))
        again = await valid_view(manager)
        assert again[1] is notice and again[-1]["content"] == "status?"


async def test_13_nothing_is_dropped_silently_every_escalation_has_an_event() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=9_000, hooks=recorder)
    await manager.add_message(prompt("Long job."))
    seen_decisions = manager.decisions
    for t in range(60):
        await fill(manager, group([f"c{t}", f"d{t}"], BIG[: 600 + 37 * t]))
        if t % 3:
            await manager.add_message(say(f"step {t} done"))
        events_before = len(recorder.named("context:compaction"))
        view = await valid_view(manager)
        changed = manager.decisions is not seen_decisions
        assert len(recorder.named("context:compaction")) == events_before + int(changed)
        seen_decisions = manager.decisions
        history = manager.messages
        removed = manager.decisions.removed
        repaired = sum(bool(m.get("_repaired")) for m in view)
        notice = sum(map(is_notice, view))
        assert len(view) == len(history) - len(removed) + repaired + notice
    events = recorder.named("context:compaction")
    assert len(events) >= 3
    for event in events:
        assert event["messages_removed"] == len(event["removed_positions"])
        assert event["messages_truncated"] == len(event["truncated_positions"])
        assert event["user_messages_stubbed"] == len(event["stubbed_positions"])
    reported = {p for e in events for p in e["removed_positions"]}
    assert reported == set(manager.decisions.removed)
    names = [n for n, _ in recorder.events if n != "context:budget"]
    assert names == ["context:pre_compact", "context:compaction", "context:post_compact"] * len(
        events
    )


async def test_14_prompt_prefix_is_byte_identical_after_one_escalation() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=20_000, hooks=recorder)

    async def system_prompt() -> str:
        return "You are a careful engineer."

    await manager.set_system_prompt_factory(system_prompt)
    await fill(manager, [prompt("Refactor."), *(m for t in range(19) for m in group([f"c{t}"]))])
    first = await valid_view(manager)
    assert len(recorder.named("context:compaction")) == 1
    assert any(is_notice(m) for m in first[:-1]), "the notice stands inside the view"
    prefix = json.dumps(first).encode()  # the notice included: it does not move
    for n in range(12):
        await fill(manager, [prompt(f"also {n}"), *group([f"n{n}"], "small")])
        view = await valid_view(manager)
        assert json.dumps(view[: len(first)]).encode() == prefix
    assert len(recorder.named("context:compaction")) == 1


# --- 15-19: counting and caps ----------------------------------------------------------------


def png_base64(width: int, height: int, body_bytes: int) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR"
    header += struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00" + b"\x00" * 4
    return base64.b64encode(header + bytes(body_bytes)).decode()


def image_result(call_id: str, data: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": [
            {"type": "text", "text": "screenshot"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": data},
            },
        ],
        "metadata": meta(),
    }


async def test_15_base64_images_are_never_counted_as_text_and_never_free() -> None:
    data = png_base64(1024, 1024, 1_000_000)  # ~1.3 MB of base64
    with_image = image_result("i0", data)
    without = result("i0", "screenshot")
    as_text_tokens = len(data) // 4
    for family, price in (("o200k", 765), ("claude3", 1398), ("claude47", 1398), (None, 1398)):
        cost = estimate_message_tokens(with_image, family=family)
        plain = estimate_message_tokens(without, family=family)
        assert cost - plain >= price * 0.95, "an image is never free"
        assert cost < as_text_tokens / 100, "base64 is never priced as text"
    remote = {
        "role": "user",
        "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
    }
    assert estimate_message_tokens(remote) >= 1_500, "unknown size costs the maximum"
    # Forty screenshots are tiny as text but large as images: they must trigger compaction.
    manager = SimpleContextManager(max_tokens=30_000)
    await manager.add_message(prompt("Check every page."))
    small = png_base64(1024, 1024, 2_000)
    for t in range(40):
        await fill(manager, [call([f"i{t}"]), image_result(f"i{t}", small)])
    view = await valid_view(manager)
    assert manager.compaction_level >= 1
    assert manager._estimate_tokens(view) <= 30_000
    assert any(m.get("_truncated") for m in view), "old screenshots became text"


async def test_16_cjk_and_json_heavy_histories_are_not_under_counted_into_an_overflow() -> None:
    if not CORPUS_DIR.is_dir():
        pytest.skip("token-count corpus not available")
    reference = json.loads((CORPUS_DIR / "reference_counts.json").read_text())["files"]

    def load(name: str) -> list[tuple[dict[str, Any], dict[str, int]]]:
        lines = (CORPUS_DIR / name).read_text(encoding="utf-8").splitlines()
        return [(json.loads(lines[r["index"]]), r) for r in reference[name]]

    json_heavy = load("taubench-gpt4o-airline-task2-trial1.jsonl")  # reuses call ids, too
    cjk = load("cjk-samples.jsonl")
    merged: list[tuple[dict[str, Any], dict[str, int]]] = []
    for message, counts in json_heavy:
        merged.append((message, counts))
        if message["role"] == "user":  # a CJK prompt after each human turn, never inside a group
            merged.append(cjk[len(merged) % len(cjk)])
    window, output = 12_000, 2_000
    for model, family in (
        ("gpt-4o", "o200k"),
        ("claude-3-5-sonnet", "claude3"),
        ("claude-opus-4-7", "claude47"),
    ):
        manager = SimpleContextManager()
        real: dict[int, int] = {}
        escalated = False
        for index, (message, counts) in enumerate(merged):
            await manager.add_message(message)
            stored = manager.messages[-1]
            real[id(stored)] = counts[family]
            if stored.get("tool_calls"):
                real[id(stored["tool_calls"])] = counts[family]
            following = merged[index + 1][0]["role"] if index + 1 < len(merged) else None
            if following == "tool":
                continue
            view = await manager.get_messages_for_request(provider=provider(window, output, model))
            assert check_view(view, history=manager.messages) == []
            escalated |= manager.compaction_level > 0
            tokens = 0
            for shown in view:
                known = real.get(id(shown))
                if known is None and shown.get("tool_calls") is not None:
                    known = real.get(id(shown["tool_calls"]))
                # Our own shortened / notice text is ASCII prose: estimate plus 10%.
                tokens += known or int(estimate_message_tokens(shown, family=family) * 1.1)
            budget = window - output - window // 16
            assert tokens <= budget, f"{model}: {tokens} real tokens in a {budget} budget"
        assert escalated, f"{model}: the test history must need compaction"


async def test_17_thinking_turn_with_two_calls_is_never_split_or_edited() -> None:
    history: list[dict[str, Any]] = [prompt("Investigate the flaky test.")]
    for t in range(14):
        history.append(call([f"a{t}", f"b{t}"], thinking=f"I should run both probes ({t})"))
        history += [result(f"a{t}"), result(f"b{t}")]
    originals = copy.deepcopy(history)
    for budget in (5_000, 8_000, 12_000, 20_000, 40_000):
        for protected in (0.0, 0.3):
            manager = SimpleContextManager(max_tokens=budget, protected_recent=protected)
            await fill(manager, history)
            view = await valid_view(manager)
            stored = manager.messages
            for index, message in enumerate(view):
                if message["role"] != "assistant":
                    continue
                position = next(i for i, m in enumerate(stored) if m is message)
                assert message == originals[position], "never edited"
                follow = view[index + 1 : index + 3]
                ids = [c["id"] for c in message["tool_calls"]]
                assert [m["tool_call_id"] for m in follow] == ids, "both results, right after"
            body = view[:-1] if is_notice(view[-1]) else view
            assert [id(m) for m in body[-3:]] == [id(m) for m in stored[-3:]], "latest intact"
    # Default settings, heavy pressure: the latest turn is a thinking answer with no calls,
    # after a big protected batch; it used to be removed at rung 7.
    manager = SimpleContextManager(max_tokens=6_000)
    ids = [f"p{i}" for i in range(5)]
    await fill(
        manager, [prompt("Refactor the parser. " + "details " * 200), call(ids, thinking="plan")]
    )
    await fill(manager, [result(i, "source line\n" * 400) for i in ids])
    answer = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "done; summarise", "signature": "s2"},
            {"type": "text", "text": "Done: the parser now handles nesting."},
        ],
        "metadata": meta(),
    }
    await fill(manager, [answer, prompt("great, now add tests")])
    view = await valid_view(manager)
    assert manager._estimate_tokens(manager.messages) > 6_000, "under real pressure"
    assert any(m is manager.messages[-2] for m in view)


async def test_18_single_tool_output_larger_than_the_window() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    window = provider(32_768, 8_192)  # budget 32_768 - 4_096 - 4_096 = 24_576
    huge = ("résumé データ \ud800 line\x00\n" * 420_000)[:10_000_000]  # 10M chars
    await fill(manager, [prompt("Dump the table."), call(["dump"])])
    await manager.add_message(
        {"role": "tool", "tool_call_id": "dump", "content": huge, "metadata": meta()}
    )
    stored = manager.messages[-1]["content"]
    encoded = stored.encode("utf-8")  # strict: valid UTF-8, surrogates gone
    assert len(encoded) <= 131_072
    assert stored.count("tool-result truncated at ingress") == 1
    assert stored.startswith(huge[:1_000].replace("\ud800", "?"))
    [clip] = recorder.named("context:tool_result_ingress_truncated")
    assert clip["tool_call_id"] == "dump" and clip["stored_text_utf8_bytes"] == len(encoded)
    # Still the newest result, so protected; but protection yields to the budget: the fit
    # pass shortens it, says so, and both the ordinary view and a hard fit come in under it.
    view = await valid_view(manager, provider=window)
    assert manager._estimate_tokens(view) <= 24_576
    assert any(m.get("_truncated") and m.get("tool_call_id") == "dump" for m in view)
    [event] = recorder.named("context:compaction")
    assert event["protection_relaxed"] == {"tool_results_shortened": 1, "groups_removed": 0}
    fitted = await manager.get_messages_for_request_retaining(
        retain_contents=[], provider=window, hard_fit=True
    )
    assert manager._estimate_tokens(fitted) <= 24_576
    # Later turns push it out of the protected set: requests fit again.
    for t in range(7):
        await fill(manager, [say(f"page {t}"), *group([f"q{t}"], "row\n" * 50)])
        view = await valid_view(manager, provider=window)
    assert manager._estimate_tokens(view) <= 24_576
    assert any(m.get("_truncated") and m.get("tool_call_id") == "dump" for m in view)


async def test_19_cap_above_the_window_is_a_no_op_and_below_it_is_reported() -> None:
    window = provider(200_000, 32_000)
    history = [prompt("Big job."), *(m for t in range(170) for m in group([f"c{t}"]))]
    views: dict[int | None, list[dict[str, Any]]] = {}
    payloads: dict[int | None, dict[str, Any]] = {}
    for cap in (None, 500_000, 50_000):
        recorder = Recorder()
        manager = SimpleContextManager(max_tokens=cap, hooks=recorder)
        await fill(manager, history)
        views[cap] = await valid_view(manager, provider=window)
        [payloads[cap]] = recorder.named("context:budget")
    derived = 200_000 - 32_000 - 4_096
    common = {
        "source": "provider_model_info",
        "context_window": 200_000,
        "max_output_tokens": 32_000,
        "requested_output": 32_000,
        "output_source": "max_output_tokens",
        "reserved_output": 32_000,
        "safety_margin": 4_096,
        "tool_definitions_tokens": 0,
        "tools_not_held_back": 0,
        "learned_overhead_tokens": 0,
        "derived_budget": derived,
        "max_tokens_fallback": 200_000,
    }
    assert payloads[500_000] == {
        **common,
        "max_tokens": 500_000,
        "capped": False,
        "effective_budget": derived,
        "request_budget": derived,
    }
    assert payloads[50_000] == {
        **common,
        "max_tokens": 50_000,
        "capped": True,
        "effective_budget": 50_000,
        "request_budget": 50_000,
    }
    assert payloads[None]["capped"] is False
    assert json.dumps(views[500_000]) == json.dumps(views[None]), "a cap above is a no-op"
    assert len(views[50_000]) < len(views[None])
