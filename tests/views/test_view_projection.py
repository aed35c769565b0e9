"""Issue 12 §4-§6: every view validates as the host's model, with unique, well-formed ids.

History keeps what was admitted; the view sends each message's projection onto
``amplifier_core.message_models.Message`` and its own tool-call ids.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.message_models import ChatRequest, Message, TextBlock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    REPAIR_KINDS,
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.history._ids import IdAssigner
from amplifier_module_context_simple.history._project import project
from amplifier_module_context_simple.sizing._features import _CJK  # pyright: ignore[reportPrivateUsage]
from amplifier_module_context_simple.views._render import truncated, without_results

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
PNG = "data:image/png;base64,iVBORw0KGgo="
SAFE = re.compile(r"[A-Za-z0-9_-]+")


def host_valid(view: list[dict[str, Any]]) -> None:
    ChatRequest(messages=[Message(**m) for m in view])


def assert_ok(view: list[dict[str, Any]], history: list[dict[str, Any]]) -> None:
    assert check_view(view, history=history) == []
    host_valid(view)


def view_call_ids(view: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for m in view:
        if m.get("role") != "assistant":
            continue
        found = [c["id"] for c in m.get("tool_calls") or []]
        if isinstance(m.get("content"), list):
            found += [b["id"] for b in m["content"] if b.get("type") == "tool_call"]
        ids += dict.fromkeys(found)
    return ids


async def fill(manager: SimpleContextManager, messages: list[dict[str, Any]]) -> None:
    for message in messages:
        await manager.add_message(message)


def fn_call(call_id: Any, name: str = "read") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


# --- §5 projection ----------------------------------------------------------------------------

FOREIGN = [
    (
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]},
        [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                      "data": "iVBORw0KGgo="}}],
    ),
    (
        {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
        [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}],
    ),
    (
        {"role": "user", "content": [{"type": "input_text", "text": "hi"},
                                     {"type": "output_text", "text": "yo"}]},
        [{"type": "text", "text": "hi"}, {"type": "text", "text": "yo"}],
    ),
    (
        {"role": "user", "content": [{"type": "wizard", "spell": 3}]},
        [{"type": "text", "text": '{"spell": 3, "type": "wizard"}'}],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("message", "expected"), FOREIGN)
async def test_foreign_blocks_are_sent_in_the_host_shape(
    message: dict[str, Any], expected: list[dict[str, Any]]
) -> None:
    manager = SimpleContextManager()
    await manager.add_message(message)
    before = copy.deepcopy(manager.messages)
    view = await manager.get_messages_for_request()
    assert view[0]["content"] == expected
    assert_ok(view, manager.messages)
    assert manager.messages == before, "history keeps the blocks as admitted"
    assert manager.view_repairs
    assert all(r.split(":", 1)[0] in REPAIR_KINDS for r in manager.view_repairs)


MISPLACED = [
    ("user", {"type": "tool_use", "id": "t9", "name": "read", "input": {"path": "a.py"}}),
    ("user", {"type": "tool_call", "id": "t8", "name": "read", "input": {}}),
    ("assistant", {"type": "tool_result", "tool_use_id": "t7", "content": "r"}),
    ("assistant", {"type": "tool_result", "content": "no id"}),
    ("system", {"type": "tool_result", "tool_use_id": "t6", "content": "r"}),
    ("tool", {"type": "tool_use", "id": "t5", "name": "read", "input": {}}),
]


@pytest.mark.parametrize(("role", "block"), MISPLACED, ids=lambda v: str(v)[:24])
async def test_a_call_or_result_block_where_its_role_cannot_carry_it_is_sent_as_text(
    role: str, block: dict[str, Any]
) -> None:
    # Pairing reads no call outside an assistant message and no result outside a user or tool
    # message; providers refuse one there. What it says goes out as its JSON text.
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": "x"}, block]}
    if role == "tool":
        message["tool_call_id"] = "t0"
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    if role == "tool":
        call = {"id": "t0", "tool": "read", "arguments": {}}
        await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
    await manager.add_message(message)
    await manager.add_message({"role": "user", "content": "next"})
    before = copy.deepcopy(manager.messages)
    view = await manager.get_messages_for_request()
    [sent] = [m for m in view if m["role"] == role and isinstance(m["content"], list)]
    assert sent["content"][1] == {"type": "text", "text": json.dumps(block, sort_keys=True)}
    assert_ok(view, manager.messages)
    assert manager.messages == before, "history keeps the block as admitted"
    if role != "system":  # system messages are sent apart from the body's repairs
        assert any(r.startswith("block-json") for r in manager.view_repairs)


@pytest.mark.parametrize(("role", "block"), MISPLACED, ids=lambda v: str(v)[:24])
def test_check_view_names_a_call_or_result_block_its_role_cannot_carry(
    role: str, block: dict[str, Any]
) -> None:
    view = [{"role": "user", "content": "go"}, {"role": role, "content": [block]}]
    problems = check_view(view)
    assert f"view[1]: a {block['type']} block in a {role} message, where providers refuse it" in (
        problems
    )


async def test_binary_blocks_become_a_placeholder_and_are_charged_as_sent() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "A" * 2_000_000, "format": "wav"}}
    huge = {"type": "wizard", "text": "word " * 200_000}  # no host equivalent, over the cap
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": [{"type": "text", "text": "x"}, audio]})
    await manager.add_message({"role": "user", "content": [huge]})
    await manager.add_message({"role": "user", "content": "last"})
    view = await manager.get_messages_for_request(token_budget=4000)
    text = view[0]["content"][1]["text"]
    assert "input_audio" in text and "wav" in text and "bytes" in text
    assert view[1]["content"][0]["text"].startswith("[wizard block not shown")
    assert sum(estimate_message_tokens(m) for m in view) < 200
    assert manager.compaction_level == 0, "the placeholder is what is charged"
    assert_ok(view, manager.messages)
    assert manager.messages[1]["content"] == [huge], "history keeps it whole"


async def test_anthropic_calls_and_results_are_sent_as_host_blocks_and_stay_paired() -> None:
    manager = SimpleContextManager()
    await fill(
        manager,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls",
                                               "input": {"p": "."}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "a b", "is_error": False}]},
            {"role": "system", "content": None},
        ],
    )  # fmt: skip
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[0] == {**manager.messages[3], "content": ""}
    assert view[2]["content"] == [{"type": "tool_call", "id": "t1", "name": "ls",
                                   "input": {"p": "."}}]  # fmt: skip
    assert view[3]["content"] == [
        {"type": "tool_result", "tool_call_id": "t1", "output": "a b", "is_error": False}
    ]


async def test_what_the_host_accepts_is_sent_as_the_very_same_object() -> None:
    manager = SimpleContextManager()
    await fill(
        manager,
        [
            {"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image", "source": {"type": "url", "url": "u"}}]},
            {"role": "assistant", "content": "", "tool_calls": [fn_call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t",
                                               "signature": "s"},
                                              {"type": "tool_call", "id": "c2", "name": "x",
                                               "input": {}}],
             "tool_calls": [{"id": "c2", "tool": "x", "arguments": {}}]},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "r"}]},
        ],
    )  # fmt: skip
    view = await manager.get_messages_for_request()
    assert all(v is h for v, h in zip(view, manager.messages, strict=True))
    assert manager.view_repairs == ()
    assert_ok(view, manager.messages)


async def test_the_request_path_projects_messages_that_never_passed_admission() -> None:
    """The persistent subclass assigns ``self.messages`` with freshly parsed dicts."""
    manager = SimpleContextManager()
    manager.messages = [
        {"role": "user", "content": [{"type": "image_url", "image_url": PNG}, "plain"]},
        {"role": "assistant", "content": None, "tool_calls": [fn_call(7)]},
        {"role": "tool", "content": "no id at all"},
        {"role": "user", "content": "x", "metadata": {1: "a"}},
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[1]["tool_calls"][0]["id"] == view[2]["tool_call_id"]


async def test_a_block_whose_model_dump_raises_is_a_value_error_naming_the_message() -> None:
    class Broken:
        def model_dump(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    with pytest.raises(ValueError, match=r"message #1 .*model_dump\(\).*boom"):
        await manager.add_message({"role": "user", "content": [Broken()]})
    manager.messages.append({"role": "user", "content": [Broken()]})
    with pytest.raises(ValueError, match=r"message #1 \(role='user'\): .*boom"):
        await manager.get_messages_for_request()


@pytest.mark.parametrize(
    ("written", "error", "named"),
    [
        ({"content": "from a store"}, ValueError, r"message #2 \(role=None\): the 'role' key"),
        ({"role": "wizard", "content": "x"}, ValueError, r"message #2 \(role='wizard'\): 'role'"),
        ({"role": 7, "content": "x"}, ValueError, r"message #2 \(role=7\): 'role' must be one"),
        ("not a dict", TypeError, r"message #2 \(str\): a message must be a dict"),
    ],
)
@pytest.mark.parametrize("resumed", [False, True])
async def test_a_message_written_straight_in_without_a_known_role_is_named_not_sent(
    written: Any, error: type[Exception], named: str, resumed: bool
) -> None:
    # A provider refuses a message with no role it knows, and the view could only send it
    # as it is: every request names it instead, and sends again once it is mended.
    manager = SimpleContextManager()
    history: list[Any] = [
        {"role": "user", "content": "Read the notes."},
        {"role": "assistant", "content": "Read."},
        written,
        {"role": "assistant", "content": "Done."},
    ]
    if resumed:  # a subclass re-reading its store assigns the list whole
        manager.messages = history
    else:
        await fill(manager, history[:2])
        manager.messages += history[2:]
    for _ in range(2):
        with pytest.raises(error, match=named):
            await manager.get_messages_for_request()
    manager.messages[2] = {"role": "user", "content": "x"}
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert [m["role"] for m in view] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "x", "metadata": {1: "a"}},
        {"role": "user", "content": 5},
        {"role": "assistant", "tool_calls": "f()"},
        "not a dict",
    ],
)
async def test_admission_refuses_only_what_cannot_be_stored(message: Any) -> None:
    manager = SimpleContextManager()
    with pytest.raises((ValueError, TypeError), match="message #0"):
        await manager.add_message(message)


# --- §4 ids --------------------------------------------------------------------------------------


def call_message(cid: str, style: str) -> dict[str, Any]:
    """One call as OpenAI chat data stores it, or as Amplifier orchestrators do."""
    if style == "openai":
        return {"role": "assistant", "content": None, "tool_calls": [fn_call(cid)]}
    return {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": cid, "name": "x", "input": {}}],
        "tool_calls": [{"id": cid, "tool": "x", "arguments": {}}],
    }


def turns(per_turn: int, count: int, style: str) -> list[dict[str, Any]]:
    """Agents that number their calls per turn: ``call_0``, ``call_1`` in every turn."""
    out: list[dict[str, Any]] = []
    for turn in range(count):
        out.append({"role": "user", "content": f"turn {turn}"})
        for k in range(per_turn):
            cid = f"call_{k}"
            out.append(call_message(cid, style))
            out.append({"role": "tool", "tool_call_id": cid, "content": f"r{turn}.{k} " * 40})
        out.append({"role": "assistant", "content": f"done {turn}"})
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    per_turn=st.integers(1, 3),
    count=st.integers(2, 5),
    style=st.sampled_from(["openai", "host"]),
    budget=st.one_of(st.none(), st.integers(300, 3000)),
)
async def test_reused_ids_are_unique_in_every_view_and_stable(
    per_turn: int, count: int, style: str, budget: int | None
) -> None:
    history = turns(per_turn, count, style)
    manager = SimpleContextManager()
    previous: list[str] = []
    for message in history:
        await manager.add_message(message)
        view = await manager.get_messages_for_request(token_budget=budget)
        assert_ok(view, manager.messages)
        ids = view_call_ids(view)
        assert len(ids) == len(set(ids))
        assert all(SAFE.fullmatch(i) and len(i) <= 40 for i in ids)
        if budget is None:
            assert ids[: len(previous)] == previous, "an earlier id never changes"
            previous = ids
    if budget is None:  # (a compacted view may have left the renamed call out)
        assert any(r.startswith("id-renamed") for r in manager.view_repairs)


def test_derived_ids_respect_the_original_shape() -> None:
    assigner = IdAssigner()
    long40 = "a" * 40
    long60 = "b" * 60
    odd = "call.1/x"
    messages = [{"role": "assistant", "tool_calls": [fn_call(i)]} for i in (long40, long60, odd)]
    for position, message in enumerate(messages * 2):
        assigner.add(message, position)
    again = [assigner.add(m, 10 + p) for p, m in enumerate(messages)]
    first, second, third = (ids.calls[0] for ids in again)
    assert len(first) <= 40 and SAFE.fullmatch(first) and first != long40
    assert 40 < len(second) <= 64 and SAFE.fullmatch(second)
    assert third != odd and len(third) <= 40
    # A later call whose literal id is a derived one is renamed in turn: unique against all.
    clash = assigner.add({"role": "assistant", "tool_calls": [fn_call(first)]}, 20)
    assert clash.calls[0] != first


@pytest.mark.parametrize("bad", [7, "", None])
async def test_calls_without_a_usable_id_are_answered_and_never_split(bad: Any) -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    for round_ in range(6):
        call = {"type": "function", "function": {"name": "read", "arguments": "{}"}}
        if bad is not None:
            call["id"] = bad
        manager.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        result: dict[str, Any] = {"role": "tool", "content": f"{round_} " + "x" * 3000}
        if bad is not None:
            result["tool_call_id"] = bad
        manager.messages.append(result)
    for budget in (None, 4000, 2500, 1500):
        view = await manager.get_messages_for_request(token_budget=budget)
        assert_ok(view, manager.messages)
        assert not any(m.get("_repaired") for m in view), "every call has its result"


async def test_a_tool_message_without_id_and_without_a_call_is_left_out_and_reported() -> None:
    manager = SimpleContextManager()
    await fill(manager, [{"role": "user", "content": "go"}, {"role": "tool", "content": "lost"}])
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert [m["role"] for m in view] == ["user"]
    assert any(r.startswith("orphan-dropped") for r in manager.view_repairs)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
@pytest.mark.parametrize("name", ["sweagent-fc-marshmallow-1867", "agentlogs-codex-images"])
async def test_corpus_views_are_host_valid_with_unique_ids(name: str) -> None:
    path = CORPUS / f"{name}.jsonl"
    manager = SimpleContextManager()
    for line in path.read_text().splitlines():
        message = json.loads(line)
        if message.get("role") == "assistant" and manager.messages:
            view = await manager.get_messages_for_request(token_budget=10_904)
            host_valid(view)
            ids = view_call_ids(view)
            assert len(ids) == len(set(ids))
        await manager.add_message(message)


# --- hypothesis: mixed shapes ---------------------------------------------------------------------

BLOCKS = st.sampled_from(
    [
        {"type": "text", "text": "t"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        {"type": "wizard", "x": 1},
        {"type": "document", "source": {"media_type": "application/pdf", "data": "JVBE"}},
        {"type": "input_text", "text": "i"},
    ]
)


@st.composite
def mixed_history(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 4))):
        out.append({"role": "user", "content": [*draw(st.lists(BLOCKS, min_size=1, max_size=3))]})
        for _ in range(draw(st.integers(0, 3))):
            cid = draw(st.sampled_from(["call_0", "call_1", "", f"t{turn}"]))
            style = draw(st.sampled_from(["openai", "host", "anthropic"]))
            size = draw(st.integers(10, 4000))
            if style == "anthropic":
                out.append(
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": cid or "u", "name": "x", "input": {}}
                        ],
                    }
                )
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": cid or "u",
                                "content": "y" * size,
                            }
                        ],
                    }
                )
                continue
            out.append(call_message(cid, style))
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": cid,
                    "content": draw(st.sampled_from([[draw(BLOCKS)], "z" * size])),
                }
            )
        out.append({"role": "assistant", "content": "answer"})
    return out  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=mixed_history(), budget=st.one_of(st.none(), st.integers(400, 4000)))
async def test_every_view_of_mixed_shapes_is_host_valid(
    history: list[dict[str, Any]], budget: int | None
) -> None:
    manager = SimpleContextManager()
    await fill(manager, history)
    before = copy.deepcopy(manager.messages)
    view = await manager.get_messages_for_request(token_budget=budget)
    assert_ok(view, manager.messages)
    ids = view_call_ids(view)
    assert len(ids) == len(set(ids))
    assert manager.messages == before


# --- §6 smaller failures -------------------------------------------------------------------------


async def test_a_typed_text_block_in_a_tool_result_is_capped_at_ingress() -> None:
    manager = SimpleContextManager(max_tool_result_bytes=1000)
    await manager.add_message(
        {"role": "tool", "tool_call_id": "c", "content": [TextBlock(text="x" * 1_000_000)]}
    )
    stored = manager.messages[0]["content"][0]
    assert len(stored["text"]) <= 1000 and "truncated at ingress" in stored["text"]


@pytest.mark.parametrize("cap", [1_000, 200_000])
async def test_a_foreign_block_is_sent_as_json_only_within_the_tool_result_cap(cap: int) -> None:
    # The cap that bounds a tool result at ingress bounds a block sent as its JSON text too.
    manager = SimpleContextManager(max_tool_result_bytes=cap)
    wizard = {"type": "wizard", "spell": "w" * 5_000}
    await manager.add_message({"role": "user", "content": [wizard]})
    [sent] = (await manager.get_messages_for_request())[0]["content"]
    if cap > 5_000:
        assert json.loads(sent["text"]) == wizard
    else:
        assert sent["text"].startswith("[wizard block not shown: media type unknown, ")


def test_a_host_shaped_result_block_can_be_shortened() -> None:
    message = {
        "role": "tool",
        "tool_call_id": "c",
        "content": [{"type": "tool_result", "tool_call_id": "c", "output": "x" * 20_000}],
    }
    short = truncated(message, 5000, 250)
    assert estimate_message_tokens(short) < estimate_message_tokens(message) / 10
    Message(**short)


@pytest.mark.parametrize("returned", [None, 42])
async def test_a_system_prompt_factory_must_return_text(returned: Any) -> None:
    manager = SimpleContextManager()
    await manager.set_system_prompt_factory(lambda: returned)
    await manager.add_message({"role": "user", "content": "go"})
    with pytest.raises(TypeError, match=type(returned).__name__):
        await manager.get_messages_for_request()


async def test_a_reminder_survives_set_messages_during_the_factory_await() -> None:
    reminder = "<system-reminder>keep me</system-reminder>"
    envelope = {"role": "user", "content": reminder,
                "metadata": {"ephemeral": True, "persisted": True}}  # fmt: skip
    manager = SimpleContextManager(protected_recent=0.0)
    await fill(manager, [{"role": "user", "content": "first"}, {"role": "user", "content": "x"},
                         envelope])  # fmt: skip
    # The replacement moves the reminder from position 2 to position 1, oldest in line.
    replaced = [
        {"role": "user", "content": "first"},
        envelope,
        *({"role": "user", "content": f"filler {i} " + "w " * 300} for i in range(6)),
        {"role": "user", "content": "last"},
    ]
    gate = asyncio.Event()

    async def factory() -> str:
        await gate.wait()
        return "system"

    await manager.set_system_prompt_factory(factory)
    request = asyncio.create_task(
        manager.get_messages_for_request_retaining(retain_contents=[reminder], token_budget=1500)
    )
    await asyncio.sleep(0)
    await manager.set_messages(replaced)
    gate.set()
    view = await request
    assert any(m.get("content") == reminder for m in view), "the named reminder is kept"
    assert manager.compaction_level > 0


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("a \u4e00\u3042\uac00\u1100é\U0001f600\ud7af"), max_size=50)
)
def test_cjk_count_matches_a_plain_count(text: str) -> None:
    from amplifier_module_context_simple.sizing._features import features

    assert features(text)[9] == len(_CJK.findall(text))


def test_cjk_count_does_not_materialise_one_string_per_character() -> None:
    text = "\u4e00" * 2_000_000
    tracemalloc.start()
    estimate_message_tokens({"role": "user", "content": text})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 60_000_000, f"peak {peak} bytes"


def test_projection_is_a_pure_function() -> None:
    message: dict[str, Any] = {"role": "user", "content": [{"type": "image_url", "image_url": PNG}]}
    ids = IdAssigner().add(message, 0)
    first, kinds = project(message, ids, json_cap=1000)
    second, again = project(message, ids, json_cap=1000)
    assert first == second and kinds == again == ("image",)
    assert message["content"][0]["type"] == "image_url"


# --- §3 turn checks (check_view(...)) ------------------------------------------------


def thinking_round(k: int, thinking: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "hm", "signature": "s"}]
    call = {"type": "tool_call", "id": f"c{k}", "name": "x", "input": {}}
    return [
        {"role": "assistant", "content": [*(blocks if thinking else []), call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k}"},
    ]


def test_an_active_turn_must_open_with_its_thinking_message() -> None:
    """One prompt, twenty rounds, thinking on the first round only (interleaving off)."""
    rounds = [m for k in range(20) for m in thinking_round(k, k == 0)]
    history = [{"role": "user", "content": "go"}, *rounds]
    assert check_view(history, history=history) == []
    split = [history[0], *rounds[2:]]  # the opening thinking round was removed
    problems = check_view(split, history=history)
    assert any("active turn" in p for p in problems)


def test_a_prompt_after_a_tool_result_only_where_the_history_had_one() -> None:
    history = [
        {"role": "user", "content": "first"},
        *thinking_round(1, False),
        {"role": "assistant", "content": "final answer"},
        {"role": "user", "content": "second"},
    ]
    assert check_view(history, history=history) == []
    split = [history[0], history[1], history[2], history[4]]  # final answer removed
    problems = check_view(split, history=history)
    assert any("directly follows a tool result" in p for p in problems)
    direct = [history[0], *thinking_round(1, False), history[4]]
    assert check_view(direct, history=direct) == [], "as in the history: fine"
    interrupted = [history[0], history[1], history[4]]  # the call was never answered
    view = [history[0], history[1], {"role": "tool", "tool_call_id": "c1", "content": "[none]"},
            history[4]]  # fmt: skip
    assert check_view(view, history=interrupted) == [], "a repair is no split"


async def test_an_id_declared_twice_in_one_message_is_sent_once() -> None:
    manager = SimpleContextManager()
    doubled = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_0", "tool": "read", "arguments": {"p": "a"}},
            {"id": "call_0", "tool": "read", "arguments": {"p": "b"}},
        ],
    }
    await manager.add_message({"role": "user", "content": "Read a and b."})
    await manager.add_message(doubled)
    await manager.add_message({"role": "tool", "tool_call_id": "call_0", "content": "A"})
    await manager.add_message({"role": "tool", "tool_call_id": "call_0", "content": "B"})
    view = await manager.get_messages_for_request()
    [sent] = [m for m in view if m.get("tool_calls")]
    assert [c["id"] for c in sent["tool_calls"]] == ["call_0"]
    assert check_view(view, history=await manager.get_messages()) == []
    assert any(r.startswith("duplicate-call-dropped:") for r in manager.view_repairs)
    assert any("declared twice" in p for p in check_view([doubled]))


async def test_a_call_after_a_repeated_id_in_the_same_message_keeps_its_id_and_result() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Read a, then list."})
    await manager.add_message(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_0", "tool": "read", "arguments": {"p": "a"}},
                {"id": "call_0", "tool": "read", "arguments": {"p": "a"}},
                {"id": "call_1", "tool": "ls", "arguments": {}},
            ],
        }
    )
    await manager.add_message({"role": "tool", "tool_call_id": "call_0", "content": "A"})
    await manager.add_message({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
    view = await manager.get_messages_for_request()
    [sent] = [m for m in view if m.get("tool_calls")]
    assert [c["id"] for c in sent["tool_calls"]] == ["call_0", "call_1"]
    assert [m.get("tool_call_id") for m in view[2:]] == ["call_0", "call_1"]
    assert view[-1]["content"] == "a.py"
    assert check_view(view, history=await manager.get_messages()) == []


def test_a_reminder_between_a_result_and_a_prompt_is_looked_through() -> None:
    reminder = {"role": "user", "content": "<r/>", "metadata": {"source": "hook"}}
    history = [
        {"role": "user", "content": "P0"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c", "tool": "t", "arguments": {}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "out"},
        {"role": "assistant", "content": "done"},
        reminder,
        {"role": "user", "content": "P1"},
    ]
    split = [history[0], history[1], history[2], reminder, history[5]]
    assert any("directly follows a tool result" in p for p in check_view(split, history=history))
    assert check_view(history, history=history) == []


async def test_an_id_declared_twice_among_content_blocks_keeps_its_first_block() -> None:
    manager = SimpleContextManager()
    doubled = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading both."},
            {"type": "tool_call", "id": "call_0", "name": "read", "input": {"p": "a"}},
            {"type": "tool_call", "id": "call_0", "name": "read", "input": {"p": "b"}},
            {"type": "tool_call", "id": "call_1", "name": "read", "input": {"p": "c"}},
        ],
    }
    await manager.add_message({"role": "user", "content": "Read a, b and c."})
    await manager.add_message(doubled)
    await manager.add_message({"role": "tool", "tool_call_id": "call_0", "content": "A"})
    await manager.add_message({"role": "tool", "tool_call_id": "call_1", "content": "C"})
    view = await manager.get_messages_for_request()
    [sent] = [m for m in view if m["role"] == "assistant"]
    calls = [b for b in sent["content"] if b.get("type") == "tool_call"]
    assert [(b["id"], b["input"]) for b in calls] == [
        ("call_0", {"p": "a"}),
        ("call_1", {"p": "c"}),
    ]
    assert check_view(view, history=await manager.get_messages()) == []
    assert any(r.startswith("duplicate-call-dropped:") for r in manager.view_repairs)


@pytest.mark.parametrize(
    ("metadata", "sent"),
    [("not a mapping", None), (["a"], None), ({1: "a", "b": 2}, {"1": "a", "b": 2})],
    ids=repr,
)
async def test_metadata_the_host_model_refuses_is_repaired_and_reported(
    metadata: Any, sent: Any
) -> None:
    # Admission refuses such metadata; a subclass writing ``self.messages`` may store it.
    manager = SimpleContextManager()
    manager.messages = [{"role": "user", "content": "Go.", "metadata": metadata}]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[0].get("metadata") == sent
    assert any(r.startswith("metadata:") for r in manager.view_repairs)


async def test_metadata_the_host_model_accepts_is_no_repair() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Go.", "metadata": {"source": "cli"}})
    await manager.get_messages_for_request()
    assert manager.view_repairs == ()


@pytest.mark.parametrize("content", [{"rows": [1, 2]}, 42, 2.5, True], ids=repr)
async def test_content_written_straight_into_the_history_is_sent_as_text_and_reported(
    content: Any,
) -> None:
    # Admission never stores such content; a subclass writing ``self.messages`` may.
    manager = SimpleContextManager()
    manager.messages = [
        {"role": "user", "content": "Show the rows."},
        {"role": "user", "content": content},
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[-1]["content"] == json.dumps(content, ensure_ascii=False)
    assert any(r.startswith("content-json:") for r in manager.view_repairs)


def test_result_blocks_answering_left_out_calls_are_dropped_whatever_names_their_call() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "gone1", "content": "a"},
            {"type": "tool_result", "tool_call_id": "gone2", "content": "b"},
            {"type": "tool_result", "tool_use_id": "kept", "content": "c"},
            {"type": "text", "text": "and a note"},
        ],
    }
    copy_ = without_results(message, {"gone1", "gone2"}, ("kept",))
    assert copy_["content"] == [message["content"][2], message["content"][3]]
    assert "tool_call_id" not in copy_, "a message that named no call names none"
    assert len(message["content"]) == 4, "the history's message is left as it was"


def test_a_tool_call_id_naming_a_left_out_call_points_at_the_call_the_message_answers() -> None:
    message = {
        "role": "tool",
        "tool_call_id": "gone",
        "content": [
            {"type": "tool_result", "tool_use_id": "gone", "content": "a"},
            {"type": "tool_result", "tool_use_id": "kept", "content": "b"},
        ],
    }
    assert without_results(message, {"gone"}, ("kept",))["tool_call_id"] == "kept"
    # A tool_call_id naming a call that is still shown stays as it is.
    answering = {**message, "tool_call_id": "kept"}
    assert without_results(answering, {"gone"}, ("kept",))["tool_call_id"] == "kept"
    other = {**message, "tool_call_id": "other"}
    assert without_results(other, {"gone"}, ("kept",))["tool_call_id"] == "other"


# --- every spelling of a block, as the host's model receives it -------------------------------


async def sent_turn(
    call: dict[str, Any], result: dict[str, Any], **extra: Any
) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]:
    """The call block and the result block the view sends for one call and its answer."""
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Go."})
    await manager.add_message({"role": "assistant", "content": [call], **extra})
    await manager.add_message({"role": "user", "content": [result]})
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    return view[1]["content"][0], view[2]["content"][0], manager.view_repairs


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ('{"path": "a.py"}', {"path": "a.py"}),
        ("not json", {"value": "not json"}),
        ("[1, 2]", {"value": "[1, 2]"}),
        (5, {"value": 5}),
        (None, {}),
    ],
    ids=["json-object", "text", "json-list", "number", "none"],
)
async def test_a_call_block_s_arguments_become_its_input(arguments: Any, sent: Any) -> None:
    call = {"type": "tool_use", "id": "c1", "name": "read", "arguments": arguments}
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}
    sent_call, _, repairs = await sent_turn(call, result)
    assert sent_call == {"type": "tool_call", "id": "c1", "name": "read", "input": sent}
    assert any(r.startswith("tool-call") for r in repairs)


async def test_a_call_block_without_a_text_name_is_sent_with_an_empty_one() -> None:
    call = {"type": "tool_call", "id": "c1", "name": 7, "input": {"p": 1}}
    result = {"type": "tool_result", "tool_call_id": "c1", "output": "ok"}
    sent_call, sent_result, _ = await sent_turn(call, result)
    assert sent_call == {"type": "tool_call", "id": "c1", "name": "", "input": {"p": 1}}
    assert sent_result == result, "the host's own shape: sent as it is"


@pytest.mark.parametrize("key", ["tool_call_id", "tool_use_id"])
async def test_a_result_block_is_sent_in_the_host_s_shape_whatever_names_its_call(key: str) -> None:
    call = {"type": "tool_call", "id": "c1", "name": "read", "input": {}}
    for result, output in (
        ({"type": "tool_result", key: "c1", "content": "text"}, "text"),
        ({"type": "tool_result", key: "c1"}, ""),
        ({"type": "tool_result", key: "c1", "content": "bad", "is_error": True}, "bad"),
    ):
        _, sent_result, repairs = await sent_turn(call, result)
        expected: dict[str, Any] = {"type": "tool_result", "tool_call_id": "c1", "output": output}
        if "is_error" in result:
            expected["is_error"] = True
        assert sent_result == expected
        assert any(r.startswith("tool-result") for r in repairs)


@pytest.mark.parametrize(
    ("block", "source"),
    [
        (
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
            {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"},
        ),
        (
            {"type": "input_image", "url": "data:;base64,BBBB"},
            {"type": "base64", "media_type": "image/png", "data": "BBBB"},
        ),
        (
            {"type": "image_url", "image_url": "https://example.com/cat.png"},
            {"type": "url", "url": "https://example.com/cat.png"},
        ),
        (
            {"type": "input_image", "image_url": "data:image/png,rawbytes"},
            {"type": "url", "url": "data:image/png,rawbytes"},
        ),
    ],
    ids=["chat-data-url", "responses-url-key", "remote", "data-url-not-base64"],
)
async def test_openai_images_are_sent_as_host_images(block: Any, source: Any) -> None:
    manager = SimpleContextManager()
    manager.messages = [{"role": "user", "content": [{"type": "text", "text": "see"}, block]}]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[0]["content"][1] == {"type": "image", "source": source}
    assert any(r.startswith("image") for r in manager.view_repairs)


@pytest.mark.parametrize(
    ("block", "media"),
    [
        ({"type": "audio", "media_type": "audio/wav"}, "audio/wav"),
        ({"type": "document", "source": {"mime_type": "application/pdf"}}, "application/pdf"),
        ({"type": "input_audio", "input_audio": {"format": "mp3"}}, "mp3"),
        ({"type": "file", "file": {"mimeType": "text/csv"}}, "text/csv"),
        ({"type": "video", "source": {"media_type": ""}}, "unknown"),
    ],
)
async def test_a_block_the_host_cannot_hold_names_its_media_type(block: Any, media: str) -> None:
    block = {**block, "data": "Z" * 3_000}
    manager = SimpleContextManager()
    manager.messages = [{"role": "user", "content": [{"type": "text", "text": "see"}, block]}]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    text = view[0]["content"][1]["text"]
    assert text.startswith(f"[{block['type']} block not shown: media type {media}, ")


async def test_names_and_ids_that_are_no_text_are_sent_as_text_and_reported() -> None:
    # Admission refuses them; a subclass writing ``self.messages`` may store them.
    manager = SimpleContextManager()
    manager.messages = [
        {"role": "user", "content": "Go.", "name": 42},
        {"role": "assistant", "content": "Done.", "tool_call_id": 7},
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert (view[0]["name"], view[1]["tool_call_id"]) == ("42", "7")
    assert sum(r.startswith("field") for r in manager.view_repairs) == 2
    assert manager.messages[0]["name"] == 42, "the history is left as it was"


async def test_blocks_already_in_the_host_s_shape_are_sent_as_they_are() -> None:
    # Keys the host's model does not name stay too: nothing to repair, nothing reported.
    call = {"type": "tool_call", "id": "c1", "name": "read", "input": {}, "cache_control": 1}
    result = {"type": "tool_result", "tool_call_id": "c1", "output": "ok", "cache_control": 2}
    sent_call, sent_result, repairs = await sent_turn(call, result)
    assert (sent_call, sent_result, repairs) == (call, result, ())
    # So do they beside a block that is repaired: only that one changes.
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "Go."})
    manager.messages.append({"role": "assistant", "content": ["Reading.", call]})
    manager.messages.append({"role": "user", "content": [result, 7]})
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    assert view[1]["content"] == [{"type": "text", "text": "Reading."}, call]
    assert view[2]["content"] == [result, {"type": "text", "text": "7"}]


class ForeignBlock:
    """A typed block from outside the host's package: sent as the plain dict it dumps to."""

    def model_dump(self) -> dict[str, Any]:
        return {"type": "text", "text": "from elsewhere"}


async def test_blocks_that_are_no_mapping_are_sent_as_text_and_typed_ones_by_their_kind() -> None:
    circular: list[Any] = []
    circular.append(circular)
    typed = TextBlock(text="typed")
    manager = SimpleContextManager()
    manager.messages = [
        {"role": "user", "content": ["plain", 5, ["a"], circular, typed, ForeignBlock()]}
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    sent = view[0]["content"]
    assert sent[:4] == [
        {"type": "text", "text": "plain"},
        {"type": "text", "text": "5"},
        {"type": "text", "text": '["a"]'},
        {"type": "text", "text": "[[...]]"},  # no JSON for it: its str()
    ]
    assert sent[4] is typed, "the host's own model goes as itself"
    assert type(sent[5]) is dict and sent[5] == {"type": "text", "text": "from elsewhere"}
    assert manager.view_repairs == (
        "text: message at position 0",
        "block-json: message at position 0",
    )


async def test_an_image_block_without_a_usable_url_is_sent_as_its_json() -> None:
    block = {"type": "image_url", "image_url": {"url": 5}}
    manager = SimpleContextManager()
    manager.messages = [{"role": "user", "content": [{"type": "text", "text": "see"}, block]}]
    view = await manager.get_messages_for_request()
    assert view[0]["content"][1] == {
        "type": "text",
        "text": '{"image_url": {"url": 5}, "type": "image_url"}',
    }


async def test_a_data_url_s_media_type_is_what_precedes_its_first_base64_marker() -> None:
    block = {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG;base64,xx"}}
    manager = SimpleContextManager()
    manager.messages = [{"role": "user", "content": [{"type": "text", "text": "see"}, block]}]
    view = await manager.get_messages_for_request()
    assert view[0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/gif",
        "data": "R0lG;base64,xx",
    }


async def test_idless_calls_get_their_derived_ids_in_order_past_entries_that_are_no_call() -> None:
    manager = SimpleContextManager()
    calls = [{"tool": name, "arguments": {}} for name in ("read", "grep", "ls")]
    manager.messages = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": "", "tool_calls": ["junk", *calls]},
        *({"role": "tool", "content": f"r{i}"} for i in range(3)),
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    ids = ["call_r1", "call_r1_1", "call_r1_2"]
    assert view[1]["tool_calls"] == [
        "junk",
        *({**c, "id": i} for c, i in zip(calls, ids, strict=True)),
    ]
    assert [m["tool_call_id"] for m in view[2:]] == ids


async def test_idless_call_and_result_blocks_get_their_derived_ids_in_order() -> None:
    manager = SimpleContextManager()
    calls = [{"type": "tool_call", "name": name, "input": {}} for name in ("read", "grep")]
    results = [{"type": "tool_result", "output": f"r{i}"} for i in range(2)]
    manager.messages = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
    ]
    view = await manager.get_messages_for_request()
    assert_ok(view, manager.messages)
    sent_calls = [b["id"] for b in view[1]["content"]]
    sent_results = [b["tool_call_id"] for b in view[2]["content"]]
    assert sent_calls == sent_results and len(set(sent_calls)) == 2
