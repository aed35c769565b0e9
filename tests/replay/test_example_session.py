"""Tests for the seeded example-session generator."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from amplifier_core.message_models import Message

from amplifier_module_context_simple.replay.recordings.example_session import generate_session


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message).encode())


def _pairing_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Return every way the call/result pairing is broken (empty when it is sound).

    Written here on purpose instead of importing the package's own checker, so the generator
    is judged by an independent reading of the rule: each assistant call is answered by exactly
    one tool message, those answers follow the assistant turn directly and in call order, and no
    tool message appears anywhere else.
    """
    problems: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m["role"] == "tool":
            problems.append(f"{i}: tool result without a preceding call")
            i += 1
            continue
        calls = (m.get("tool_calls") or []) if m["role"] == "assistant" else []
        ids = [c["id"] for c in calls]
        answers = [x.get("tool_call_id") for x in messages[i + 1 : i + 1 + len(ids)]]
        if answers != ids:
            problems.append(f"{i}: calls {ids} answered by {answers}")
        for c, r in zip(calls, messages[i + 1 : i + 1 + len(ids)], strict=False):
            if r["role"] != "tool" or r.get("name") != c["tool"]:
                problems.append(f"{i}: result for {c['id']} is not a matching tool message")
        i += 1 + len(ids)
    return problems


@pytest.fixture(scope="module")
def default_session() -> list[dict[str, Any]]:
    return generate_session()


def test_same_seed_same_session_and_other_seed_differs() -> None:
    a = json.dumps(generate_session(300, seed=11))
    assert a == json.dumps(generate_session(300, seed=11))
    assert a != json.dumps(generate_session(300, seed=12))


def test_shorter_session_is_a_prefix_of_a_longer_one() -> None:
    # The benchmarks compare 1,000 / 10,000 / 50,000 messages: the length only decides where
    # generation stops, so they share everything but the last few (closing) messages.
    short, long = generate_session(200, seed=5), generate_session(2000, seed=5)
    assert short[:150] == long[:150]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 10, 57, 400, 1000, 3001])
def test_exact_length_and_pairing(n: int) -> None:
    for seed in (1, 7, 42):
        messages = generate_session(n, seed=seed)
        assert len(messages) == n
        assert _pairing_problems(messages) == []
        if n:
            first = messages[0]
            assert first["role"] == "user" and not first.get("metadata")
        if n > 1:
            last = messages[-1]
            assert last["role"] == "assistant" and not last.get("tool_calls")


def test_negative_length_rejected() -> None:
    with pytest.raises(ValueError, match="n_messages"):
        generate_session(-1)


def test_call_ids_unique_and_blocks_match_calls() -> None:
    messages = generate_session(5000, seed=3)
    ids = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    assert len(ids) == len(set(ids))
    assert all(i.startswith("call_") for i in ids)
    counts = {len(m["tool_calls"]) for m in messages if m.get("tool_calls")}
    assert counts == {1, 2, 3, 4}
    for m in messages:
        if m.get("tool_calls") and isinstance(m["content"], list):
            blocks = [b for b in m["content"] if b["type"] == "tool_call"]
            assert [(b["id"], b["name"], b["input"]) for b in blocks] == [
                (c["id"], c["tool"], c["arguments"]) for c in m["tool_calls"]
            ]
            for b, c in zip(blocks, m["tool_calls"], strict=True):
                assert b["input"] is not c["arguments"]  # equal, but never aliased
            assert all(isinstance(c["arguments"], dict) for c in m["tool_calls"])


def test_size_mix(default_session: list[dict[str, Any]]) -> None:
    sizes = [_size(m) for m in default_session]
    assert sum(s > 50_000 for s in sizes) >= 2
    assert any(s > 120_000 for s in sizes)  # above a typical ingress cap
    assert sum(s < 1_000 for s in sizes) > len(sizes) // 3


def test_contains_every_kind_of_message(default_session: list[dict[str, Any]]) -> None:
    hooks = [m for m in default_session if (m.get("metadata") or {}).get("source") == "hook"]
    assert hooks
    for m in hooks:
        assert m["role"] == "user"
        assert m["metadata"] == {"source": "hook", "ephemeral": True, "persisted": True}
        assert m["content"].startswith('<system-reminder source="hooks-')
        assert m["content"].endswith("</system-reminder>")
    humans = [m for m in default_session if m["role"] == "user" and not m.get("metadata")]
    assert len(humans) >= 2  # the opening prompt and at least one follow-up

    blocks = [b for m in default_session if isinstance(m["content"], list) for b in m["content"]]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert thinking and all(b["signature"] and b["thinking"] for b in thinking)
    images = [b for b in blocks if b["type"] == "image"]
    assert images
    for b in images:
        png = base64.b64decode(b["source"]["data"], validate=True)
        assert b["source"]["media_type"] == "image/png"
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR"
    tool_names = {m["name"] for m in default_session if m["role"] == "tool"}
    assert {"read_file", "bash", "grep", "edit_file"} <= tool_names
    json_results = [
        m for m in default_session if m["role"] == "tool" and str(m["content"]).startswith("{")
    ]
    assert all(isinstance(json.loads(m["content"]), dict) for m in json_results)
    assert json_results


def test_json_round_trip_and_host_validation() -> None:
    messages = generate_session(3000, seed=9)
    assert json.loads(json.dumps(messages)) == messages
    for m in messages:
        Message(**m)
