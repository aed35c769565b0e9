"""The index's one-pass reading of plain messages (``_plain``) gives the general path's facts.

``HistoryIndex`` reads the commonest shapes in one walk and leaves everything else to the
general path (ids, projection, flags read one by one). Both must agree on every fact: the sent
form (the very same object), kinds, ids, flags, positions, pairing, turns and the ids given
out afterwards. The strategies below sit on each edge of what reads as plain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.history._history import Facts, HistoryIndex
from amplifier_module_context_simple.history._plain import read_plain
from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.vocabulary._messages import LOADED_TOOLS_KEY, ROLES
from amplifier_module_context_simple.vocabulary._public import is_reference_only
from tests.test_adversarial import hostile_sessions
from tests.views.test_view_projection import mixed_history

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
TS = "2026-01-01T00:00:00.000Z"


class GeneralIndex(HistoryIndex):
    """The index with its one-pass reading turned off: every message takes the general path."""

    def _plain_facts(self, message: Any) -> Facts | None:
        return None


def indexed(index: HistoryIndex, history: list[Any]) -> HistoryIndex | type[Exception]:
    try:
        index.sync(history, None)
    except Exception as exc:  # the general path's refusal must be the fast path's too
        return type(exc)
    return index


def assert_same_index(history: list[Any]) -> None:
    general = indexed(GeneralIndex(estimate_message_tokens), history)
    fast = indexed(HistoryIndex(estimate_message_tokens), history)
    if not isinstance(general, HistoryIndex) or not isinstance(fast, HistoryIndex):
        assert general == fast
        return
    assert len(fast.facts) == len(general.facts)
    for mine, theirs in zip(fast.facts, general.facts, strict=True):
        assert mine == theirs
        assert (mine.sent is mine.message) == (theirs.sent is theirs.message)
        assert mine.sent is theirs.sent or mine.sent is not mine.message
    for key in (
        "system_positions",
        "human_positions",
        "tool_result_positions",
        "loaded_tool_positions",
        "display_only_positions",
        "image_messages",
        "generation",
        "estimator_calls",
    ):
        assert getattr(fast, key) == getattr(general, key), key
    assert vars(fast.pairing) == vars(general.pairing)
    assert fast.turns.active() == general.turns.active()
    assert fast.turns.in_round == general.turns.in_round
    assert vars(fast._ids) == vars(general._ids)  # pyright: ignore[reportPrivateUsage]


# --- messages on each edge of "plain" -----------------------------------------------------

CALL_ID = st.one_of(
    st.sampled_from(["call_1", "call_2", "call_3", "toolu_01", "call_1_r3", "call_r1"]),
    st.sampled_from(["bad id!", "x" * 70, "", "ü"]),
    st.sampled_from([None, 7, ["call_1"]]),
)
GOOD_ID = st.sampled_from(["call_1", "call_2", "call_3", "call_4", "toolu_01", "a" * 64])
EDGE_ID = st.sampled_from(["b" * 64, "c" * 65, "call.1", "call_2_r5"])
"""Ids on the edge of well formed: the longest kept, one too long, an unsafe character."""
METADATA = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"timestamp": st.just(TS)},
        optional={
            "source": st.sampled_from(["hook", "context-compaction", "user", None]),
            "ephemeral": st.sampled_from([True, False, 1]),
            LOADED_TOOLS_KEY: st.just([{"type": "tool_search_output"}]),
            "amplifier_public_message": st.just({"role": "user", "content": "p"}),
            "amplifier_public_reference_only": st.sampled_from([True, False]),
        },
    ),
    st.just({1: "not a string key"}),
    st.just("not a dict"),
)
TEXT = st.sampled_from(["", "hello", "漢字", "x" * 50])


@st.composite
def block(draw: st.DrawFn, call_id: Any = None) -> Any:
    kind = draw(
        st.sampled_from(
            [
                "text",
                "thinking",
                "redacted",
                "call",
                "call",
                "tool_use",
                "image",
                "reasoning",
                "nested",
                "bad-text",
                "bad-call",
                "string",
                "result",
            ]
        )
    )
    cid = call_id if call_id is not None else draw(GOOD_ID)
    if kind == "text":
        return {"type": "text", "text": draw(TEXT)}
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(TEXT), "signature": "sig"}
    if kind == "redacted":
        return {"type": "redacted_thinking", "data": "abc"}
    if kind == "call":
        return {"type": "tool_call", "id": cid, "name": "bash", "input": {"q": 1}}
    if kind == "tool_use":
        return {"type": "tool_use", "id": cid, "name": "bash", "input": {}}
    if kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": ""},
        }
    if kind == "reasoning":
        return {"type": "reasoning", "content": [], "summary": []}
    if kind == "nested":
        image = {"type": "image", "source": {"type": "url", "url": "u"}}
        return {"type": "text", "text": "t", "content": [image]}
    if kind == "bad-text":
        return {"type": "text", "text": draw(st.sampled_from([None, 3, ["t"]]))}
    if kind == "bad-call":
        return {
            "type": "tool_call",
            "id": draw(CALL_ID),
            "name": draw(st.sampled_from(["bash", None])),
            "input": draw(st.sampled_from([{}, "{}", None])),
        }
    if kind == "result":
        return {"type": "tool_result", "tool_use_id": cid, "content": "r"}
    return "a bare string"


EDGE_BLOCK = st.sampled_from(
    [
        {"type": "text", "text": "t", "content": [{"type": "image", "source": {"url": "u"}}]},
        {"type": "thinking", "thinking": "t", "content": "c"},
        {"type": "tool_call", "id": "call_9", "name": "bash", "input": "{}"},
        {"type": "tool_call", "id": "call_9", "name": None, "input": {}},
        {"type": "tool_use", "id": "call_9", "name": "bash", "input": {}},
        {"type": "redacted_thinking", "data": None},
        {"type": "reasoning", "content": [], "summary": []},
    ]
)
"""Blocks one field away from plain."""
PLAIN_BLOCK = st.sampled_from(
    [
        {"type": "text", "text": "t"},
        {"type": "thinking", "thinking": "why", "signature": "sig"},
        {"type": "redacted_thinking", "data": "abc"},
    ]
)


@st.composite
def plain_message(draw: st.DrawFn) -> dict[str, Any]:
    """A message of a shape that reads as plain (its ids may still clash with earlier ones)."""
    kind = draw(st.sampled_from(["result", "prompt", "assistant"]))
    message: dict[str, Any]
    if kind == "result":
        message = {
            "role": draw(st.sampled_from(["tool", "tool", "function"])),
            "tool_call_id": draw(GOOD_ID),
            "content": draw(TEXT),
        }
    elif kind == "prompt":
        role = draw(st.sampled_from(["user", "user", "system", "developer"]))
        message = {"role": role, "content": draw(TEXT)}
    else:
        ids = draw(st.lists(st.one_of(GOOD_ID, EDGE_ID), max_size=3, unique=True))
        message = {"role": "assistant", "content": draw(TEXT)}
        if ids or draw(st.booleans()):
            message["tool_calls"] = [{"id": i, "tool": "bash", "arguments": {}} for i in ids]
        if draw(st.booleans()):
            calls = [{"type": "tool_call", "id": i, "name": "bash", "input": {}} for i in ids]
            mirrored = draw(st.booleans()) or "tool_calls" not in message
            message["content"] = [
                *draw(st.lists(PLAIN_BLOCK, max_size=2)),
                *(calls if mirrored else []),
            ]
    if draw(st.booleans()):
        message["metadata"] = draw(
            st.fixed_dictionaries(
                {"timestamp": st.just(TS)},
                optional={
                    "source": st.sampled_from(["hook", "context-compaction", "user"]),
                    "ephemeral": st.sampled_from([True, False, 1]),
                    LOADED_TOOLS_KEY: st.just([{"type": "tool_search_output"}]),
                },
            )
        )
    if draw(st.integers(0, 3)) == 0:
        message["name"] = "bash"
    return message


@st.composite
def near_plain(draw: st.DrawFn) -> Any:
    """A plain message, or one with a single change that may or may not keep it plain."""
    message = draw(plain_message())
    change = draw(
        st.sampled_from(
            [
                "none", "none", "none", "metadata", "name", "call-id", "tool-use-id",
                "content", "reasoning", "block", "call-block", "call-blocks", "call-shape",
                "tool-calls", "repeat", "role",
            ]
        )
    )  # fmt: skip
    content = message.get("content")
    calls = message.get("tool_calls")
    if change == "metadata":
        message["metadata"] = draw(METADATA)
    elif change == "name":
        message["name"] = draw(st.sampled_from([3, None, ""]))
    elif change == "call-id":
        message["tool_call_id"] = draw(CALL_ID)
    elif change == "tool-use-id":
        message["tool_use_id"] = draw(GOOD_ID)
        if draw(st.booleans()):
            message.pop("tool_call_id", None)
    elif change == "content":
        message["content"] = draw(st.one_of(st.none(), st.lists(block(), max_size=2), st.just({})))
    elif change == "reasoning":
        message["reasoning_content"] = draw(st.sampled_from(["why", "", None]))
    elif change == "block":
        content = message["content"] = content if isinstance(content, list) else []
        content.insert(draw(st.integers(0, len(content))), draw(st.one_of(EDGE_BLOCK, block())))
    elif change == "call-block" and message["role"] == "assistant":
        # A call block of its own, or one of the mirrored ones with a field changed.
        listed = content if isinstance(content, list) else []
        mirrored = [b for b in listed if b.get("type") == "tool_call"]
        if mirrored and draw(st.booleans()):
            key, value = draw(
                st.sampled_from(
                    [("input", "{}"), ("input", None), ("name", None), ("id", "bad id!")]
                )
            )
            draw(st.sampled_from(mirrored))[key] = value
        else:
            extra = {"type": "tool_call", "id": draw(GOOD_ID), "name": "bash", "input": {}}
            message["content"] = [*(content if isinstance(content, list) else []), extra]
    elif change == "call-blocks" and isinstance(content, list):
        message["content"] = draw(st.permutations(content))
        if content and draw(st.booleans()):
            message["content"].pop()
    elif change == "call-shape" and calls:
        at = draw(st.integers(0, len(calls) - 1))
        cid = calls[at]["id"]
        calls[at] = draw(
            st.sampled_from(
                [
                    {"tool_call_id": cid, "tool": "bash"},
                    {"id": draw(CALL_ID), "tool": "bash"},
                    "not a call",
                ]
            )
        )
    elif change == "tool-calls":
        message["tool_calls"] = draw(st.sampled_from([{}, "[]", [], None]))
    elif change == "repeat" and calls:
        calls.append(dict(calls[0]))
        if isinstance(content, list):
            content.append({"type": "tool_call", "id": calls[0]["id"], "name": "b", "input": {}})
    elif change == "role":
        message["role"] = draw(st.sampled_from(["wizard", None, "assistant", "user", "tool"]))
    return message


# --- the properties -------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(near_plain(), max_size=20))
def test_plain_reading_gives_the_general_facts_near_every_edge(history: list[Any]) -> None:
    assert_same_index(history)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_sessions())
def test_plain_reading_gives_the_general_facts_on_hostile_sessions(history: list[Any]) -> None:
    assert_same_index([m for m in history if isinstance(m, dict)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_history())
def test_plain_reading_gives_the_general_facts_on_mixed_shapes(history: list[Any]) -> None:
    assert_same_index(history)


def test_a_block_with_content_of_its_own_is_read_the_general_way() -> None:
    """A block's own ``content`` may hide an image: such a message is read in full, and the
    image is counted as the general reading counts it."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo" + "A" * 4_000}}  # fmt: skip
    nested = {"role": "assistant", "content": [{"type": "text", "text": "see", "content": [image]}]}
    assert read_plain(nested) is None
    assert_same_index([{"role": "user", "content": "look"}, nested])
    index = HistoryIndex(estimate_message_tokens)
    index.sync([nested], None)
    assert index.facts[0].image


def _assistant(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "x", **fields}


def _call_block(**fields: Any) -> dict[str, Any]:
    return _assistant(
        content=[{"type": "tool_call", "id": "a", "name": "n", "input": {}, **fields}]
    )


@pytest.mark.parametrize(
    "message",
    [
        _assistant(tool_calls=[{"id": 5, "tool": "t", "arguments": {}}]),
        _assistant(tool_calls=[{"id": "", "tool": "t", "arguments": {}}]),
        _call_block(input="not a dict"),
        _call_block(name=5),
        _call_block(id=""),
        _call_block(id=7),
        _assistant(content=[{"type": ["text"], "text": "a list for a type"}]),
    ],
    ids=["int id", "empty id", "input text", "int name", "empty block id", "int block id",
         "unhashable type"],
)  # fmt: skip
def test_a_call_or_block_of_an_odd_shape_is_read_the_general_way(message: dict[str, Any]) -> None:
    assert read_plain(message) is None
    assert_same_index([{"role": "user", "content": "go"}, message])


def test_the_benchmark_session_reads_plain_but_for_its_image_results() -> None:
    """The example session (the benchmark's) is plain but for the tool results that carry an
    image: the one-pass reading is what a resume runs on, and gives the same facts."""
    history = json.loads(json.dumps(generate_session(600, seed=7)))
    general = [m for m in history if read_plain(m) is None]
    assert general and all(m["role"] == "tool" and isinstance(m["content"], list) for m in general)
    stored = [{**m, "metadata": {"timestamp": TS}} for m in history]
    assert_same_index(history)
    assert_same_index(stored)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not checked out")
def test_plain_reading_gives_the_general_facts_on_the_corpus() -> None:
    for path in sorted(CORPUS.glob("*.jsonl")):
        history = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        assert_same_index(history)
        assert_same_index(
            [{**m, "metadata": {**(m.get("metadata") or {}), "timestamp": TS}} for m in history]
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(near_plain(), max_size=16), st.lists(st.integers(0, 16), max_size=4))
def test_display_only_rows_change_nothing_but_their_own_positions(
    history: list[Any], at: list[int]
) -> None:
    """A row kept for display only holds its position and nothing else: the turns, the
    positions the ladder reads and the pairing are those of the history without it."""
    # Only messages a provider can take are indexed: one with an unknown role is refused.
    rows = [
        m
        for m in history
        if isinstance(m, dict) and m.get("role") in ROLES and not is_reference_only(m)
    ]
    shown: list[Any] = list(rows)
    for place in sorted(at, reverse=True):
        copy = rows[place % len(rows)] if rows else {"role": "user", "content": "x"}
        reference = {**copy, "metadata": {"amplifier_public_reference_only": True}}
        shown.insert(min(place, len(shown)), reference)
    plain = indexed(HistoryIndex(estimate_message_tokens), rows)
    both = indexed(HistoryIndex(estimate_message_tokens), shown)
    assert isinstance(plain, HistoryIndex) and isinstance(both, HistoryIndex)
    kept = [i for i, fact in enumerate(both.facts) if not fact.display_only]
    assert both.display_only_positions == [i for i in range(len(shown)) if i not in kept]

    def moved(positions: list[int]) -> list[int]:
        return [kept[p] for p in positions]

    for key in ("system_positions", "human_positions", "tool_result_positions"):
        assert getattr(both, key) == moved(getattr(plain, key)), key
    mine, theirs = both.turns.active(), plain.turns.active()
    assert mine.anchor == tuple(moved(list(theirs.anchor)))
    assert (mine.follows, mine.opener) == tuple(
        None if p is None else kept[p] for p in (theirs.follows, theirs.opener)
    )
    assert sorted(both.pairing.orphans) == moved(sorted(plain.pairing.orphans))
