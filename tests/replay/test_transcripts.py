"""Tests for loading transcripts (Amplifier transcript.jsonl, OpenAI chat JSONL, stdin)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.message_models import Message, ToolCall

from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.replay.recordings.transcripts import (
    RAW_ARGUMENTS_KEY,
    LineError,
    LoadedTranscript,
    TranscriptError,
    load_transcript,
    normalise_tool_call,
)

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
TS = "2026-05-09T10:00:00.000000+00:00"


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# What the Amplifier CLI writes: no system lines, None values dropped, a timestamp per line.
AMPLIFIER_ROWS: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the failing test.", "timestamp": TS},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Look first.", "signature": "c2ln"},
            {"type": "tool_call", "id": "call_1", "name": "bash", "input": {"command": "ls"}},
        ],
        "tool_calls": [{"id": "call_1", "tool": "bash", "arguments": {"command": "ls"}}],
        "timestamp": TS,
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "bash", "content": "a.py", "timestamp": TS},
    {
        "role": "user",
        "content": '<system-reminder source="hooks-todo">x</system-reminder>',
        "metadata": {"source": "hook", "ephemeral": True, "persisted": True},
        "timestamp": TS,
    },
    # A call-only turn whose None content the writer dropped.
    {
        "role": "assistant",
        "tool_calls": [{"id": "c2", "tool": "grep", "arguments": {}}],
        "timestamp": TS,
    },
    {"role": "tool", "tool_call_id": "c2", "content": "", "timestamp": TS},
    {
        "role": "assistant",
        "content": "Done.",
        "metadata": {"timestamp": "earlier"},
        "timestamp": TS,
    },
]

OPENAI_ROWS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": [{"type": "text", "text": "What is in this image?"}]},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I should open it.",
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "view", "arguments": '{"p": 1}'}}
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "t1",
        "name": "view",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
    },
    {"role": "assistant", "content": "A cat."},
]

# OPENAI_ROWS as loaded: only the call changes, to the shape Amplifier orchestrators store.
OPENAI_LOADED: list[dict[str, Any]] = [
    *OPENAI_ROWS[:2],
    {
        **OPENAI_ROWS[2],
        "tool_calls": [{"id": "t1", "tool": "view", "name": "view", "arguments": {"p": 1}}],
    },
    *OPENAI_ROWS[3:],
]


def test_amplifier_transcript(tmp_path: Path) -> None:
    loaded = load_transcript(_write_jsonl(tmp_path / "transcript.jsonl", AMPLIFIER_ROWS))
    assert isinstance(loaded, LoadedTranscript)
    assert loaded.format == "amplifier"
    assert loaded.skipped == []
    msgs = loaded.messages
    assert len(msgs) == len(AMPLIFIER_ROWS)
    assert msgs[0] == {
        "role": "user",
        "content": "Fix the failing test.",
        "metadata": {"timestamp": TS},
    }
    assert msgs[1]["content"] == AMPLIFIER_ROWS[1]["content"]
    assert msgs[1]["tool_calls"] == AMPLIFIER_ROWS[1]["tool_calls"]
    # Hook flags survive next to the moved timestamp.
    assert msgs[3]["metadata"] == {
        "source": "hook",
        "ephemeral": True,
        "persisted": True,
        "timestamp": TS,
    }
    assert msgs[4]["content"] == ""  # restored so the host's Message accepts it
    # Metadata that already has a timestamp keeps it; the top-level one is left in place.
    assert msgs[6]["metadata"] == {"timestamp": "earlier"} and msgs[6]["timestamp"] == TS
    for m in msgs:
        Message(**m)


def test_openai_chat_is_kept_as_is_but_for_its_calls(tmp_path: Path) -> None:
    loaded = load_transcript(str(_write_jsonl(tmp_path / "chat.jsonl", OPENAI_ROWS)))
    assert loaded.format == "openai-chat"
    assert loaded.messages == OPENAI_LOADED
    assert loaded.messages[2]["content"] is None
    assert loaded.messages[2]["reasoning_content"] == "I should open it."


def test_format_without_traits_follows_the_file_name(tmp_path: Path) -> None:
    rows = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert load_transcript(_write_jsonl(tmp_path / "transcript.jsonl", rows)).format == "amplifier"
    assert load_transcript(_write_jsonl(tmp_path / "chat.jsonl", rows)).format == "openai-chat"


def test_session_directory(tmp_path: Path) -> None:
    session = tmp_path / "projects" / "-home-dev-proj" / "sessions" / "0f3c"
    _write_jsonl(session / "transcript.jsonl", AMPLIFIER_ROWS)
    loaded = load_transcript(session)
    assert loaded.format == "amplifier"
    assert len(loaded.messages) == len(AMPLIFIER_ROWS)

    empty_dir = tmp_path / "empty-session"
    empty_dir.mkdir()
    with pytest.raises(TranscriptError, match=r"without a transcript\.jsonl") as info:
        load_transcript(empty_dir)
    assert str(empty_dir) in str(info.value)


def test_stdin() -> None:
    text = "".join(json.dumps(r) + "\n" for r in OPENAI_ROWS)
    loaded = load_transcript("-", stdin=io.StringIO(text))
    assert loaded.messages == OPENAI_LOADED
    assert loaded.format == "openai-chat"
    with pytest.raises(TranscriptError, match="standard input is empty"):
        load_transcript("-", stdin=io.StringIO("\n  \n"))


def test_malformed_lines_are_skipped_with_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        json.dumps({"role": "user", "content": "first"}),  # 1
        "{not json",  # 2
        "",  # 3: blank lines are ignored, but still counted
        "[1, 2]",  # 4
        json.dumps({"content": "no role"}),  # 5
        json.dumps({"role": "robot", "content": "x"}),  # 6
        json.dumps({"role": "user", "content": 42}),  # 7
        json.dumps({"role": "user", "content": ["bare string block"]}),  # 8
        json.dumps({"role": "tool", "tool_call_id": 7, "content": "x"}),  # 9
        json.dumps({"role": "assistant", "content": "last"}),  # 10
    ]
    data = "\n".join(lines).encode() + b"\n\xff\xfe broken bytes\n"  # 11
    path.write_bytes(data)
    loaded = load_transcript(path)
    assert [m["content"] for m in loaded.messages] == ["first", "last"]
    assert [e.line_number for e in loaded.skipped] == [2, 4, 5, 6, 7, 8, 9, 11]
    reasons = {e.line_number: e.reason for e in loaded.skipped}
    assert reasons[2].startswith("invalid JSON")
    assert reasons[4] == "expected a JSON object, got array"
    assert reasons[5] == "no 'role' key"
    assert reasons[6] == "unknown role 'robot'"
    assert "content" in reasons[7] and "number" in reasons[7]
    assert "content block 0" in reasons[8]
    assert "tool_call_id" in reasons[9]
    assert "UTF-8" in reasons[11]
    assert str(LineError(2, "x")) == "line 2: x"

    with pytest.raises(TranscriptError, match=r"line 2: invalid JSON") as info:
        load_transcript(path, strict=True)
    assert "\n" not in str(info.value)


def test_crlf_and_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    body = "\r\n".join(json.dumps(r) for r in OPENAI_ROWS) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    loaded = load_transcript(path)
    assert loaded.messages == OPENAI_LOADED and loaded.skipped == []


def test_unicode_line_separator_inside_a_string(tmp_path: Path) -> None:
    row = {"role": "user", "content": "a\u2028b\u0085c"}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert load_transcript(path).messages == [row]
    stdin = io.StringIO(json.dumps(row, ensure_ascii=False))
    assert load_transcript("-", stdin=stdin).messages == [row]


def test_errors_are_one_line_and_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(TranscriptError, match="no such file") as info:
        load_transcript(missing)
    assert str(missing) in str(info.value)

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TranscriptError, match="is empty"):
        load_transcript(empty)

    junk = tmp_path / "junk.jsonl"
    junk.write_text("nope\n[]\n")
    with pytest.raises(TranscriptError, match=r"no usable message \(2 line\(s\) skipped") as info:
        load_transcript(junk)
    assert "\n" not in str(info.value)


def test_generated_session_round_trips_through_a_transcript(tmp_path: Path) -> None:
    session = generate_session(300, seed=4)
    rows = [{**m, "timestamp": TS} for m in session]
    loaded = load_transcript(_write_jsonl(tmp_path / "s" / "transcript.jsonl", rows))
    assert loaded.format == "amplifier"
    for original, got in zip(session, loaded.messages, strict=True):
        meta = dict(got.pop("metadata"))
        assert meta.pop("timestamp") == TS
        assert meta == (original.get("metadata") or {})
        assert got == {k: v for k, v in original.items() if k != "metadata"}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="token-count corpus not available")
def test_every_corpus_file_loads_completely() -> None:
    files = sorted(CORPUS.glob("*.jsonl"))
    assert files
    for path in files:
        loaded = load_transcript(path)
        n_lines = sum(1 for line in path.read_text(encoding="utf-8").split("\n") if line.strip())
        assert len(loaded.messages) == n_lines, path.name
        assert loaded.skipped == [], path.name
        assert loaded.format == "openai-chat", path.name


# --- tool calls from foreign logs are normalised to the stored shape -----------------------


def _openai_call(cid: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def _load_calls(tmp_path: Path, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c.get("id"), "content": "ok"} for c in calls),
    ]
    loaded = load_transcript(_write_jsonl(tmp_path / "chat.jsonl", rows))
    assert loaded.skipped == []
    return loaded.messages[1]["tool_calls"]


def test_openai_call_becomes_the_stored_shape_with_tool_and_name(tmp_path: Path) -> None:
    args = '{"path": "src/a.py", "lines": [1, 2], "opts": {"n": null}}'
    (call,) = _load_calls(tmp_path, [_openai_call("call_9", "read_file", args)])
    assert call == {
        "id": "call_9",
        "tool": "read_file",
        "name": "read_file",
        "arguments": {"path": "src/a.py", "lines": [1, 2], "opts": {"n": None}},
    }
    # What Amplifier's providers read: the host's ToolCall (name) and the Anthropic one (tool).
    ToolCall(id=call["id"], name=call["name"], arguments=call["arguments"])
    assert call["tool"] == "read_file"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("{}", {}),
        ("", {}),
        ("  \n", {}),
        (None, {}),
        ({"already": "parsed"}, {"already": "parsed"}),
        ("{not json", {RAW_ARGUMENTS_KEY: "{not json"}),
        ('{"a": 1', {RAW_ARGUMENTS_KEY: '{"a": 1'}),
        ("[1, 2]", {RAW_ARGUMENTS_KEY: "[1, 2]"}),
        ("42", {RAW_ARGUMENTS_KEY: "42"}),
        ('"just a string"', {RAW_ARGUMENTS_KEY: '"just a string"'}),
        ("ls -la", {RAW_ARGUMENTS_KEY: "ls -la"}),
        ([1, "x"], {RAW_ARGUMENTS_KEY: '[1, "x"]'}),
        (7, {RAW_ARGUMENTS_KEY: "7"}),
    ],
)
def test_call_arguments_are_always_a_dict(arguments: Any, expected: dict[str, Any]) -> None:
    call = normalise_tool_call(_openai_call("c", "f", arguments))
    assert call["arguments"] == expected
    ToolCall(id="c", name=call["name"], arguments=call["arguments"])


def test_missing_or_bad_name_becomes_empty_string_and_the_call_stays() -> None:
    call = normalise_tool_call({"id": "c", "type": "function", "function": {"arguments": "{}"}})
    assert call == {"id": "c", "tool": "", "name": "", "arguments": {}}
    call = normalise_tool_call({"id": "c", "function": {"name": 3, "arguments": "{}"}})
    assert call["tool"] == call["name"] == ""


def test_other_keys_of_a_foreign_call_are_kept() -> None:
    call = normalise_tool_call({**_openai_call("c", "f", "{}"), "index": 0})
    assert call == {"id": "c", "index": 0, "tool": "f", "name": "f", "arguments": {}}
    # Only the OpenAI wrapper goes: a type other than "function" is not ours to drop.
    odd = normalise_tool_call({"id": "c", "type": "custom", "function": {"name": "f"}})
    assert odd == {"id": "c", "type": "custom", "tool": "f", "name": "f", "arguments": {}}


def test_host_toolcall_shape_gains_tool(tmp_path: Path) -> None:
    calls = _load_calls(tmp_path, [{"id": "c1", "name": "grep", "arguments": '{"q": "x"}'}])
    assert calls == [{"id": "c1", "name": "grep", "tool": "grep", "arguments": {"q": "x"}}]


def test_stored_shape_calls_are_not_touched(tmp_path: Path) -> None:
    stored = {"id": "c1", "tool": "bash", "arguments": {"command": "ls"}}
    assert normalise_tool_call(stored) is stored
    # Even a stored call with odd arguments is the orchestrator's business, not the loader's.
    odd = {"id": "c2", "tool": "bash", "arguments": "{}"}
    assert normalise_tool_call(odd) is odd
    loaded = load_transcript(_write_jsonl(tmp_path / "transcript.jsonl", AMPLIFIER_ROWS))
    assert loaded.messages[1]["tool_calls"] == AMPLIFIER_ROWS[1]["tool_calls"]
    assert loaded.messages[4]["tool_calls"] == AMPLIFIER_ROWS[4]["tool_calls"]


def test_mixed_calls_in_one_message_each_normalised(tmp_path: Path) -> None:
    calls = _load_calls(
        tmp_path,
        [
            {"id": "a", "tool": "bash", "arguments": {"command": "ls"}},
            _openai_call("b", "read", '{"p": "x"}'),
        ],
    )
    assert calls == [
        {"id": "a", "tool": "bash", "arguments": {"command": "ls"}},
        {"id": "b", "tool": "read", "name": "read", "arguments": {"p": "x"}},
    ]


def test_amplifier_format_file_with_openai_calls_is_normalised_too(tmp_path: Path) -> None:
    rows = [
        {"role": "user", "content": "go", "timestamp": TS},
        {"role": "assistant", "tool_calls": [_openai_call("x", "ls", "{}")], "timestamp": TS},
        {"role": "tool", "tool_call_id": "x", "content": "a", "timestamp": TS},
    ]
    loaded = load_transcript(_write_jsonl(tmp_path / "transcript.jsonl", rows))
    assert loaded.format == "amplifier"
    assert loaded.messages[1]["tool_calls"] == [
        {"id": "x", "tool": "ls", "name": "ls", "arguments": {}}
    ]
    assert loaded.messages[1]["content"] == ""


def test_anthropic_tool_use_blocks_are_content_and_stay(tmp_path: Path) -> None:
    # The loader converts calls, not content: tool_use blocks are left for the view to project.
    block = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"c": "ls"}}
    rows = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, block]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
        },
    ]
    loaded = load_transcript(_write_jsonl(tmp_path / "chat.jsonl", rows))
    assert loaded.messages == rows
    assert "tool_calls" not in loaded.messages[1]


def test_the_file_on_disk_is_what_was_read(tmp_path: Path) -> None:
    # Normalising builds new dicts: the parsed row keeps its original call (nothing shared).
    path = _write_jsonl(tmp_path / "chat.jsonl", OPENAI_ROWS)
    first = load_transcript(path).messages
    second = load_transcript(path).messages
    first[2]["tool_calls"][0]["arguments"]["p"] = 99
    assert second == OPENAI_LOADED


@pytest.mark.skipif(not CORPUS.is_dir(), reason="token-count corpus not available")
def test_every_corpus_call_reaches_the_host_with_a_name_and_arguments() -> None:
    for path in sorted(CORPUS.glob("*.jsonl")):
        raw = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
        loaded = load_transcript(path).messages
        for before, after in zip(raw, loaded, strict=True):
            raw_calls = before.get("tool_calls") or []
            calls = after.get("tool_calls") or []
            assert len(calls) == len(raw_calls), path.name
            for rc, call in zip(raw_calls, calls, strict=True):
                assert "function" not in call and "type" not in call, path.name
                assert call["id"] == rc["id"]
                assert call["tool"] == call["name"] == rc["function"]["name"] != ""
                text = rc["function"]["arguments"]
                try:
                    parsed = json.loads(text or "{}")
                except json.JSONDecodeError:
                    parsed = None  # e.g. Codex's free-form apply_patch input
                expected = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: text}
                assert call["arguments"] == expected, path.name
                ToolCall(id=call["id"], name=call["name"], arguments=call["arguments"])
            # Everything but the calls is as logged.
            assert {k: v for k, v in after.items() if k != "tool_calls"} == {
                k: v for k, v in before.items() if k != "tool_calls"
            }, path.name
