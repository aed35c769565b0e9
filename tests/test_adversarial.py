"""Hostile input: every message is either admitted and yields valid views, or refused at once.

A refusal must be a ``TypeError`` / ``ValueError`` that names the message (``message #N``) and
leaves the history exactly as it was. An admitted message must be stored as given (plus the
timestamp we add, and the ingress cap on tool text), must not change anything admitted before
it, and every view built afterwards must pass ``check_view``. For the host's ``Message`` model
the rule is: a history message the host accepts is never made unacceptable by the view, and
everything the view synthesises (placeholders, notices, shortened copies) is acceptable.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import ChatRequest, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

TS = "2026-01-01T00:00:00.000Z"

# --- building blocks -------------------------------------------------------------------------

ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "\x00",
            "a\x00b",
            "\ud800",
            "x\udfffy",
            "\udc80" * 3,
            "漢字かな한글",
            "🙂" * 5,
            "\u202e",
        ]
    ),
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(["ab ", "漢", "\x00", "{}", "\ud83d"]),
        st.integers(0, 4_000),
    ),
)
# Wrong types for any field. No NaN: history equality is checked with ==.
WRONG = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.lists(st.integers(), max_size=2), max_size=2),
)
BAD_ROLE = st.one_of(
    st.sampled_from(["wizard", "", "USER", "tool ", "human", "model"]),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.integers(),
    st.none(),
    st.booleans(),
)


def deep_blocks(depth: int, text: str, answers: str = "deep") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    for _ in range(depth):
        block = {"type": "tool_result", "tool_use_id": answers, "content": [block]}
    return block


class Ids:
    """Call ids: fresh ones, the odd reused one, and ids of results that come before a call."""

    def __init__(self) -> None:
        self.declared: list[str] = []
        self.next = 0

    def fresh(self) -> str:
        self.next += 1
        return f"call_{self.next}"

    def upcoming(self) -> str:
        return f"call_{self.next + 1}"  # a result that arrives before its call


@st.composite
def block(draw: st.DrawFn, ids: Ids) -> Any:
    """One content block: well formed, unknown, mistyped, not a block, or deeply nested."""
    kind = draw(
        st.sampled_from(
            ["text", "thinking", "image", "tool_call", "unknown", "wrong", "deep", "typed-bad"]
        )
    )
    if kind == "text":
        return {"type": "text", "text": draw(ODD_TEXT)}
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(ODD_TEXT), "signature": "sig"}
    if kind == "image":
        data = draw(st.sampled_from(["iVBORw0KGgo=", "!!!not base64", "", "R0lGODlh"]))
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
    if kind == "tool_call":
        return {"type": "tool_call", "id": ids.fresh(), "name": "x", "input": {}}
    if kind == "unknown":
        return {
            "type": draw(st.sampled_from(["wizard", "audio", "x" * 300, ""])),
            "data": draw(ODD_TEXT),
        }
    if kind == "deep":
        answers = draw(st.sampled_from(["deep", *ids.declared[-2:]]))
        return deep_blocks(draw(st.integers(1, 60)), draw(ODD_TEXT), answers)
    if kind == "typed-bad":  # a known block type with a field of the wrong type
        return {"type": "text", "text": draw(WRONG)}
    return draw(WRONG)  # not a block at all


@st.composite
def hostile(draw: st.DrawFn, ids: Ids) -> Any:
    kind = draw(
        st.sampled_from(
            [
                "prompt",
                "prompt",
                "hook",
                "say",
                "calls",
                "calls",
                "result",
                "result",
                "system",
                "blocks",
                "mutated",
                "display",
                "not-a-dict",
            ]
        )
    )
    m: dict[str, Any]
    if kind == "prompt":
        m = {"role": "user", "content": draw(ODD_TEXT)}
    elif kind == "hook":
        m = {
            "role": "user",
            "content": draw(ODD_TEXT),
            "metadata": {"source": "hook", "ephemeral": True},
        }
    elif kind == "say":
        m = {"role": "assistant", "content": draw(st.one_of(ODD_TEXT, st.none()))}
    elif kind == "calls":
        width = draw(st.integers(0, 4))
        new = [ids.fresh() for _ in range(width)]
        if new and ids.declared and draw(st.integers(0, 5)) == 0:
            new[0] = draw(st.sampled_from(ids.declared))  # an id reused by a later turn
        ids.declared += new
        calls: list[Any] = [
            {"id": i, "tool": "bash", "arguments": {"q": draw(ODD_TEXT)}} for i in new
        ]
        if draw(st.booleans()) and new:
            calls.append(dict(calls[0]))  # the same id twice in one message
        if draw(st.integers(0, 5)) == 0:
            calls.append({"id": draw(st.sampled_from([None, 7, ""])), "tool": "bash"})
        m = {"role": "assistant", "content": draw(st.sampled_from(["", None])), "tool_calls": calls}
    elif kind == "result":
        options = [*ids.declared[-6:], ids.upcoming(), "ghost"]
        call_id = draw(st.one_of(st.sampled_from(options), st.none()))
        content = draw(st.one_of(ODD_TEXT, st.lists(block(ids), max_size=3)))
        m = {"role": "tool", "tool_call_id": call_id, "content": content}
        if call_id is None:
            del m["tool_call_id"]
    elif kind == "system":
        m = {"role": "system", "content": draw(ODD_TEXT)}
    elif kind == "blocks":
        m = {
            "role": draw(st.sampled_from(["user", "assistant", "tool"])),
            "content": draw(st.lists(block(ids), max_size=4)),
        }
    elif kind == "display":
        # Amplifier's public history: a display-only copy of any message, anywhere (never
        # sent, so it must not change pairing, turns or ids), or a public copy riding along.
        m = draw(hostile(ids))
        if not isinstance(m, dict):
            return m
        key = draw(st.sampled_from(["amplifier_public_reference_only", "amplifier_public_message"]))
        return {**m, "metadata": {key: True if key.endswith("only") else dict(m)}}
    elif kind == "mutated":
        m = {"role": "user", "content": "fine"}
        field = draw(
            st.sampled_from(["content", "tool_calls", "metadata", "role", "name", "tool_call_id"])
        )
        if field == "role":
            m["role"] = draw(BAD_ROLE)
        elif field == "tool_calls":
            m = {
                "role": "assistant",
                "content": "",
                "tool_calls": draw(st.one_of(WRONG, st.just("[{}]"))),
            }
        elif field == "content":
            m["content"] = draw(
                st.one_of(WRONG, st.lists(st.lists(st.text(max_size=2)), min_size=1, max_size=2))
            )
        else:
            m[field] = draw(WRONG)
    else:
        return draw(st.one_of(WRONG, st.just(["role", "user"])))
    if isinstance(m, dict) and draw(st.integers(0, 6)) == 0:
        m["metadata"] = draw(WRONG)
    return m


@st.composite
def hostile_sessions(draw: st.DrawFn) -> list[Any]:
    ids = Ids()
    return [draw(hostile(ids)) for _ in range(draw(st.integers(1, 18)))]


# --- the property ----------------------------------------------------------------------------


def assert_view_ok(
    view: list[dict[str, Any]], history: list[dict[str, Any]], json_cap: int = 131_072
) -> None:
    assert check_view(view, history=history, json_cap=json_cap) == []
    # Every view validates as the host's model, whatever the history holds (issue 12 §5).
    ChatRequest(messages=[Message(**message) for message in view])


async def admit(manager: SimpleContextManager, message: Any) -> bool:
    """Add one hostile message; check the refusal or the admission contract."""
    before = copy.deepcopy(manager.messages)
    position = len(before)
    try:
        await manager.add_message(message)
    except (TypeError, ValueError) as exc:
        assert f"message #{position}" in str(exc), str(exc)
        assert manager.messages == before, "a refusal changes nothing"
        return False
    assert manager.messages[:position] == before, "admitted history is never changed"
    stored = manager.messages[position]
    for key, value in message.items():
        if key == "metadata" or (key == "content" and _capped_at_ingress(message)):
            continue
        assert stored[key] == value or stored[key] is value
    assert isinstance(stored["metadata"], dict)
    return True


def _capped_at_ingress(message: dict[str, Any]) -> bool:
    """Whether admission may clip the content: a result in any shape pairing reads (a tool
    or function message, a user message with tool_result blocks; issue 21 §2)."""
    if message.get("role") in ("tool", "function"):
        return True
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and any(
            isinstance(b, dict) and b.get("type") == "tool_result"
            for b in content  # pyright: ignore[reportUnknownVariableType]
        )
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(hostile_sessions(), st.lists(st.integers(40, 60_000), min_size=1, max_size=4))
async def test_hostile_messages_are_admitted_validly_or_refused_cleanly(
    messages: list[Any], budgets: list[int]
) -> None:
    manager = SimpleContextManager(max_tool_result_bytes=2_000)
    for step, message in enumerate(messages):
        await admit(manager, message)
        budget = budgets[step % len(budgets)]
        view = await manager.get_messages_for_request(budget)
        assert_view_ok(view, manager.messages, json_cap=manager.max_tool_result_bytes)
    history = copy.deepcopy(manager.messages)
    state = (manager.decisions, manager.compaction_stats, manager.token_meter_stats)
    try:
        view = await manager.get_messages_for_request_retaining(
            retain_contents=[], token_budget=500, hard_fit=True
        )
    except ContextLengthError:
        assert (manager.decisions, manager.compaction_stats, manager.token_meter_stats) == state
    else:
        assert_view_ok(view, manager.messages, json_cap=manager.max_tool_result_bytes)
    assert manager.messages == history, "requests never change history"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_sessions())
async def test_set_messages_is_all_or_nothing_for_hostile_lists(messages: list[Any]) -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "the session so far"})
    before = copy.deepcopy(manager.messages)
    try:
        await manager.set_messages(messages)
    except (TypeError, ValueError) as exc:
        assert "message #" in str(exc)
        assert manager.messages == before
        return
    assert len(manager.messages) == len(messages)
    assert_view_ok(await manager.get_messages_for_request(2_000), manager.messages)


@pytest.mark.parametrize(
    "retain",
    [
        "one string",
        [7],
        [None],
        [b"bytes"],
        ["never admitted"],
        [["nested"]],
    ],
)
async def test_hostile_retention_requests_are_refused_without_state_change(retain: Any) -> None:
    manager = SimpleContextManager(max_tokens=3_000)
    await manager.add_message({"role": "user", "content": "go " * 2_000})
    await manager.add_message({"role": "assistant", "content": "working"})
    state = (manager.decisions, manager.compaction_stats, manager.token_meter_stats)
    with pytest.raises((TypeError, ValueError)):
        await manager.get_messages_for_request_retaining(retain_contents=retain)
    assert (manager.decisions, manager.compaction_stats, manager.token_meter_stats) == state


# --- the expensive cases, once each ------------------------------------------------------------

TEN_MB = 10 * 1024 * 1024


async def test_ten_megabyte_strings_everywhere() -> None:
    manager = SimpleContextManager(max_tokens=50_000)
    text = ("x" * 1_023 + "\n") * (TEN_MB // 1_024)
    hostile_text = ("ab\x00\ud800漢" * (TEN_MB // 10))[:TEN_MB]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "start"},
        {"role": "user", "content": text, "metadata": {"source": "hook", "ephemeral": True}},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "calling"}],
            "tool_calls": [{"id": "big", "tool": "write", "arguments": {"body": "y" * TEN_MB}}],
        },
        {"role": "tool", "tool_call_id": "big", "content": hostile_text},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "z" * TEN_MB}]},
        {"role": "user", "content": "done?"},
        {"role": "assistant", "content": "yes"},
    ]
    for message in messages:
        assert await admit(manager, message)
    stored = manager.messages[4]["content"]
    assert len(stored.encode("utf-8")) <= 131_072, "clipped at ingress, valid UTF-8"
    view = await manager.get_messages_for_request()
    assert_view_ok(view, manager.messages)
    assert manager.compaction_level > 0


async def test_deep_nesting_is_admitted_without_recursion_errors() -> None:
    nested_args: dict[str, Any] = {"leaf": "v"}
    for _ in range(50_000):
        nested_args = {"a": nested_args}
    manager = SimpleContextManager(max_tokens=4_000)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [deep_blocks(50_000, "deep prompt")]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "n", "tool": "x", "arguments": nested_args}],
        },
        {"role": "tool", "tool_call_id": "n", "content": [deep_blocks(50_000, "result", "n")]},
        {"role": "user", "content": "next", "metadata": {"nested": nested_args}},
    ]
    for message in messages:
        await manager.add_message(message)
        view = await manager.get_messages_for_request()
        assert check_view(view) == []
    assert len(manager.messages) == 4
    assert manager.messages[1]["tool_calls"][0]["arguments"] is nested_args


async def test_duplicate_result_ids_and_results_before_their_call() -> None:
    manager = SimpleContextManager()
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go", "metadata": {"timestamp": TS}},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "too early",
            "metadata": {"timestamp": TS},
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "tool": "t", "arguments": {}}],
            "metadata": {"timestamp": TS},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "first", "metadata": {"timestamp": TS}},
        {"role": "tool", "tool_call_id": "c1", "content": "again", "metadata": {"timestamp": TS}},
        {"role": "user", "content": "ok", "metadata": {"timestamp": TS}},
    ]
    for message in messages:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert_view_ok(view, manager.messages)
    assert [m["content"] for m in view if m["role"] == "tool"] == ["first"]


# --- regressions for what this suite found (fixed in 2bd4e4e) ------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "wizard", "data": "x"}],
        [{"type": "text", "text": 5}],
        [{"type": "text"}],
        [{"type": "tool_call", "id": 5, "name": "x", "input": {}}],
        [{"type": "thinking", "thinking": None}],
        [{"type": "image", "source": "not a dict"}],
    ],
)
async def test_unknown_or_mistyped_blocks_are_admitted_and_sent_host_valid(
    content: list[dict[str, Any]],
) -> None:
    """They used to abort the turn in the host's Message model, then to be refused (losing a
    tool result); now history keeps them as they came and the view sends a projection."""

    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    await manager.add_message({"role": "user", "content": content})
    assert manager.messages[1]["content"] == content, "history keeps the block as admitted"
    view = await manager.get_messages_for_request()
    ChatRequest(messages=[Message(**m) for m in view])
    assert check_view(view, history=manager.messages) == []
    assert manager.view_repairs


@pytest.mark.parametrize("role", [["user"], {"r": 1}])
async def test_unhashable_role_is_refused_naming_the_message(role: Any) -> None:
    """It used to escape as a bare ``TypeError: unhashable type``."""
    manager = SimpleContextManager()
    with pytest.raises(ValueError, match=r"message #0 .*'role'"):
        await manager.add_message({"role": role, "content": "x"})


async def test_prompt_with_none_content_passes_the_checker() -> None:
    """The view sends None as ""; check_view used to call the first prompt changed."""
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": None})
    view = await manager.get_messages_for_request()
    assert_view_ok(view, manager.messages)


async def test_stray_result_block_for_an_unknown_call_is_left_out_of_the_view() -> None:
    """A results message answering its call and an unknown id used to be sent unchanged."""
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "go"})
    await manager.add_message(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "x", "input": {}}],
        }
    )
    await manager.add_message(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "gone", "content": "stray"},
            ],
        }
    )
    await manager.add_message({"role": "user", "content": "next"})
    before = copy.deepcopy(manager.messages)
    view = await manager.get_messages_for_request()
    assert check_view(view, history=manager.messages) == []
    assert [b["tool_call_id"] for b in view[2]["content"]] == ["a"], "sent in the host's shape"
    assert manager.messages == before, "the repair is in the view only"
    assert any("gone" in repair for repair in manager.view_repairs)


def test_text_nested_past_the_depth_limit_is_never_free() -> None:
    """Text under 16+ nested result blocks used to cost 4 tokens, whatever its size."""
    block: dict[str, Any] = {"type": "text", "text": "word " * 200_000}
    for _ in range(20):
        block = {"type": "tool_result", "tool_use_id": "x", "content": [block]}
    assert estimate_message_tokens({"role": "user", "content": [block]}) > 100_000


async def test_one_results_message_answering_two_turns_leaves_no_call_unanswered() -> None:
    """Fixed in fc3db37: the second turn's id used to count as answered, then be stripped."""
    manager = SimpleContextManager()
    for message in [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "tool": "t"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_2", "tool": "t"}, {"id": "call_4", "tool": "t"}],
        },
        {"role": "user", "content": "status?"},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "tool_result", "tool_use_id": "call_4", "content": "x"}],
        },
    ]:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert_view_ok(view, manager.messages)
    fillers = [m["tool_call_id"] for m in view if m.get("_repaired")]
    assert fillers == ["call_2", "call_4"], "the second turn's calls get placeholders"


def block_result(call_id: str, text: str = "x") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


@pytest.mark.parametrize(
    "answer",
    [
        {"role": "tool", "content": [block_result("call_2", "late " * 2_000)]},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "ab " * 2_000}, block_result("call_2")],
        },
    ],
)
async def test_shortening_a_tool_message_keeps_the_ids_its_blocks_answer(
    answer: dict[str, Any],
) -> None:
    """Fixed in 7855202: a truncated tool message used to become plain text, losing the id."""
    manager = SimpleContextManager(max_tokens=3_000, protected_tool_results=0)
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1"}, {"id": "call_2"}]},
        answer,
        *({"role": "user", "content": f"more {i} " * 300} for i in range(12)),
    ]
    for message in history:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert any(m.get("_truncated") for m in view), "the answer was shortened"
    assert check_view(view, history=manager.messages) == []


async def test_tool_message_naming_an_unknown_call_but_answering_a_known_one() -> None:
    """Fixed in 7855202: the view used to send ``tool_call_id: call_9`` after call_1."""
    manager = SimpleContextManager()
    for message in [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "tool": "t"}]},
        {"role": "tool", "tool_call_id": "call_9", "content": [block_result("call_1")]},
        {"role": "user", "content": "next"},
    ]:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert check_view(view, history=manager.messages) == []


async def test_a_result_repeating_an_answered_id_is_not_sent_as_a_second_result() -> None:
    """Fixed in 8819e18: the copy kept ``tool_call_id: call_1``, a second result for call_1."""
    manager = SimpleContextManager()
    for message in [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1"}, {"id": "call_2"}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "first"},
        {"role": "tool", "tool_call_id": "call_1", "content": [block_result("call_2")]},
        {"role": "user", "content": "next"},
    ]:
        await manager.add_message(message)
    view = await manager.get_messages_for_request()
    assert check_view(view, history=manager.messages) == []
