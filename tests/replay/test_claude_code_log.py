"""Claude Code's own session logs: read as stored messages, their usage fed to the report.

Every log here is written by the tests (:class:`Log`), in the shape Claude Code writes: one
event per line, one assistant event per content block of an API response (the events of one
response share ``message.id`` and its usage), tool results as user events, bookkeeping events
of other types, sub-agent turns marked ``isSidechain``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.recordings.claude_code_log import (
    LoadedLog,
    load_claude_code_log,
)
from amplifier_module_context_simple.replay.recordings.transcripts import TranscriptError

from ..provider_rules import anthropic_violations, call_shape_violations, host_violations
from .cli_runs import run, run_json

MODEL = "claude-sonnet-4-5-20250929"
SESSION = "5b0c6a8e-0000-4000-8000-000000000001"


class Log:
    """A Claude Code log under construction, one event per call (or per block)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._last: str | None = None

    def _event(self, kind: str, **extra: Any) -> dict[str, Any]:
        uuid = f"00000000-0000-4000-8000-{len(self.events):012d}"
        event: dict[str, Any] = {
            "parentUuid": self._last,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/project",
            "sessionId": SESSION,
            "version": "2.0.14",
            "type": kind,
            "uuid": uuid,
            "timestamp": f"2026-11-30T10:{len(self.events) // 60:02d}:{len(self.events) % 60:02d}Z",
            **extra,
        }
        self._last = uuid
        self.events.append(event)
        return event

    def user(self, content: str | list[dict[str, Any]], **extra: Any) -> Log:
        self._event("user", message={"role": "user", "content": content}, **extra)
        return self

    def results(self, *results: dict[str, Any], **extra: Any) -> Log:
        """One user event holding ``results`` (tool_result blocks), as Claude Code writes."""
        self._event(
            "user",
            message={"role": "user", "content": list(results)},
            toolUseResult={"stdout": "Claude Code's own copy", "stderr": ""},
            **extra,
        )
        return self

    def response(
        self,
        msg_id: str,
        *blocks: dict[str, Any],
        usage: dict[str, int] | None = None,
        model: str = MODEL,
        **extra: Any,
    ) -> Log:
        """One API response: an assistant event per block, all with its id and usage."""
        recorded = usage if usage is not None else usage_of(100, 0, 0, 10)
        for block in blocks:
            message = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": recorded,
            }
            self._event("assistant", message=message, requestId=f"req_{msg_id}", **extra)
        return self

    def other(self, kind: str, **extra: Any) -> Log:
        self._event(kind, **extra)
        return self

    def write(self, path: Path, *, extra_lines: tuple[str, ...] = ()) -> Path:
        lines = [json.dumps(e) for e in self.events] + list(extra_lines)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


def wide(*args: str) -> Result:
    """The command's result at 120 columns, so no table column is dropped."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})


def usage_of(fresh: int, written: int, read: int, output: int) -> dict[str, int]:
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": output,
        "service_tier": "standard",  # type: ignore[dict-item]
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "Bash", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def thinking(value: str, signature: str = "RXJzdCBkZW5rZW4=") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def roles(loaded: LoadedLog) -> list[str]:
    return [m["role"] for m in loaded.messages]


def usages(loaded: LoadedLog) -> list[dict[str, Any] | None]:
    return [None if r.usage is None else r.usage.raw for r in loaded.requests()]


def assert_sendable(messages: list[dict[str, Any]]) -> None:
    """The whole history as one view passes the host's models and the Anthropic rules."""
    assert host_violations(messages) == []
    assert call_shape_violations(messages) == []
    assert anthropic_violations(messages, history=messages) == []


# --- a session in miniature, used by several tests -----------------------------------------


def session_log() -> Log:
    """Two text turns, a response split over thinking + text + tool_use, its result."""
    return (
        Log()
        .other("summary", summary="Listing files", leafUuid="x")
        .user("List the files, please.")
        .response("msg_01", text("Sure."), usage=usage_of(12, 3000, 0, 40))
        .user("Only the Python ones.")
        .response(
            "msg_02",
            thinking("A glob will do."),
            text("Looking."),
            tool_use("toolu_01", command="ls *.py"),
            usage=usage_of(8, 200, 3000, 60),
        )
        .results(result("toolu_01", "a.py\nb.py"))
        .other("file-history-snapshot", messageId="m", snapshot={}, isSnapshotUpdate=False)
        .response("msg_03", text("Two files: a.py and b.py."), usage=usage_of(5, 90, 3200, 20))
    )


def test_plain_text_turns(tmp_path: Path) -> None:
    path = (
        Log()
        .user("Hello")
        .response("msg_a", text("Hi! How can I help?"))
        .user("Nothing, thanks.")
        .response("msg_b", text("Bye."))
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    assert [(m["role"], m["content"]) for m in loaded.messages] == [
        ("user", "Hello"),
        ("assistant", [text("Hi! How can I help?")]),
        ("user", "Nothing, thanks."),
        ("assistant", [text("Bye.")]),
    ]
    assert loaded.request_count == 2
    assert loaded.model == MODEL
    assert loaded.skipped == []
    # The event's time is where an Amplifier transcript keeps it.
    assert loaded.messages[0]["metadata"] == {"timestamp": "2026-11-30T10:00:00Z"}
    assert_sendable(loaded.messages)


def test_a_response_over_several_events_is_one_message_with_its_usage_once(
    tmp_path: Path,
) -> None:
    loaded = load_claude_code_log(session_log().write(tmp_path / "s.jsonl"))
    assert roles(loaded) == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    merged = loaded.messages[3]
    assert [b["type"] for b in merged["content"]] == ["thinking", "text", "tool_call"]
    assert merged["content"][0]["signature"] == "RXJzdCBkZW5rZW4="
    assert merged["tool_calls"] == [
        {"id": "toolu_01", "tool": "Bash", "name": "Bash", "arguments": {"command": "ls *.py"}}
    ]
    assert loaded.request_count == 3
    # Anthropic's input_tokens leave the cache out; the host's usage counts the reads in.
    assert usages(loaded) == [
        {"input_tokens": 12, "cache_read_tokens": 0, "cache_write_tokens": 3000,
         "output_tokens": 40},
        {"input_tokens": 3008, "cache_read_tokens": 3000, "cache_write_tokens": 200,
         "output_tokens": 60},
        {"input_tokens": 3205, "cache_read_tokens": 3200, "cache_write_tokens": 90,
         "output_tokens": 20},
    ]  # fmt: skip
    assert_sendable(loaded.messages)


def test_the_last_event_of_a_response_gives_its_output_count(tmp_path: Path) -> None:
    # Streaming fills output_tokens in as the blocks arrive; the input figures stay.
    log = Log().user("Go")
    log.response("msg_1", text("one"), usage=usage_of(10, 0, 0, 1))
    log.response("msg_1", text("two"), usage=usage_of(10, 0, 0, 30))
    loaded = load_claude_code_log(log.write(tmp_path / "s.jsonl"))
    assert roles(loaded) == ["user", "assistant"]
    assert usages(loaded) == [
        {"input_tokens": 10, "cache_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 30}
    ]


def test_a_result_written_while_its_response_streams_does_not_split_it(tmp_path: Path) -> None:
    # Claude Code runs a tool as soon as its block is complete: its result may be logged
    # before the response's next block.
    path = (
        Log()
        .user("Check both")
        .response("msg_1", tool_use("toolu_a", command="ls a"))
        .results(result("toolu_a", "a"))
        .response("msg_1", tool_use("toolu_b", command="ls b"))
        .results(result("toolu_b", "b"))
        .response("msg_2", text("Done."))
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    assert roles(loaded) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in loaded.messages[1]["tool_calls"]] == ["toolu_a", "toolu_b"]
    assert loaded.request_count == 2
    assert_sendable(loaded.messages)


def test_tool_results_string_blocks_and_errors(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}  # fmt: skip
    path = (
        Log()
        .user("Run the three")
        .response(
            "msg_1",
            tool_use("toolu_1", command="echo hi"),
            tool_use("toolu_2", "Read", file_path="/p/x.png"),
            tool_use("toolu_3", command="false"),
        )
        .results(result("toolu_1", "hi"))
        .results(result("toolu_2", [text("the picture:"), image]))
        .results(result("toolu_3", "Exit code 1", is_error=True))
        .response("msg_2", text("One failed."))
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    tools = [m for m in loaded.messages if m["role"] == "tool"]
    assert [(t["tool_call_id"], t["name"]) for t in tools] == [
        ("toolu_1", "Bash"),
        ("toolu_2", "Read"),
        ("toolu_3", "Bash"),
    ]
    assert tools[0]["content"] == "hi"
    assert tools[1]["content"] == [text("the picture:"), image]  # images stay as blocks
    assert tools[2]["content"] == "Exit code 1"
    assert tools[2]["metadata"]["is_error"] is True
    assert "is_error" not in tools[0]["metadata"]
    assert_sendable(loaded.messages)


def test_text_beside_results_follows_them(tmp_path: Path) -> None:
    path = (
        Log()
        .user("Try it")
        .response("msg_1", tool_use("toolu_1", command="make"))
        .user([text("[Request interrupted by user]"), result("toolu_1", "stopped", is_error=True)])
        .response("msg_2", text("Stopped."))
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    assert roles(loaded) == ["user", "assistant", "tool", "user", "assistant"]
    assert loaded.messages[3]["content"] == [text("[Request interrupted by user]")]
    assert_sendable(loaded.messages)


def test_sidechain_events_are_left_out_and_counted(tmp_path: Path) -> None:
    log = Log().user("Delegate the search").response("msg_1", tool_use("toolu_t", "Task"))
    log.user("search for TODO", isSidechain=True)
    log.response("msg_side", text("found 3"), isSidechain=True)
    log.results(result("toolu_t", "3 TODOs")).response("msg_2", text("There are 3."))
    loaded = load_claude_code_log(log.write(tmp_path / "s.jsonl"))
    assert roles(loaded) == ["user", "assistant", "tool", "assistant"]
    assert "found 3" not in json.dumps(loaded.messages)
    assert loaded.request_count == 2
    assert any("2 sub-agent (sidechain) event(s) left out" in n for n in loaded.notes)


def test_events_that_are_not_messages_are_skipped_and_counted(tmp_path: Path) -> None:
    log = session_log()
    log.other("system", subtype="informational", content="hook ran")
    log.other("queue-operation", operation="enqueue")
    loaded = load_claude_code_log(log.write(tmp_path / "s.jsonl"))
    assert loaded.skipped == []
    note = next(n for n in loaded.notes if n.startswith("events that are not messages"))
    for kind in ("1 summary", "1 file-history-snapshot", "1 system", "1 queue-operation"):
        assert kind in note


def test_meta_and_compact_summary_users_are_messages(tmp_path: Path) -> None:
    path = (
        Log()
        .user("<local-command-caveat>Caveat</local-command-caveat>", isMeta=True)
        .user("Hello")
        .response("msg_1", text("Hi"), usage=usage_of(10, 500, 0, 5))
        .other("system", subtype="compact_boundary", content="Conversation compacted")
        .user("This session is being continued ... Summary: said hello.", isCompactSummary=True)
        .user("And now?")
        .response("msg_2", text("Now this."), usage=usage_of(10, 300, 0, 5))
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    assert roles(loaded) == ["user", "user", "assistant", "user", "user", "assistant"]
    assert loaded.messages[0]["content"].startswith("<local-command-caveat>")
    # After the compaction Claude Code sends the summary onwards: the cache sees a new start.
    sent = [r.payload["messages"] for r in loaded.requests()]
    assert sent[1][0]["content"][0]["text"].startswith("This session is being continued")
    document = run_json("replay", str(path))
    assert document["cache"]["requests"][1]["break"] is True
    assert document["cache"]["requests"][1]["cause"] == "compaction"
    # Its reading answered the summary onwards, which is what the replay's view sends too
    # (it starts afresh at the summary): the meter is given both readings.
    assert document["source"]["recorded_readings"] == {"found": 2, "fed": 2, "withheld": 0}
    assert document["requests"][1]["history_messages"] == 2


def test_a_synthetic_assistant_message_is_kept_without_usage(tmp_path: Path) -> None:
    path = (
        Log()
        .user("Hello")
        .response("msg_1", text("Hi"), usage=usage_of(10, 100, 0, 5))
        .user("Again")
        .response(
            "f1d6c7e8-synthetic",
            text("API Error: Connection error."),
            model="<synthetic>",
            usage=usage_of(0, 0, 0, 0),
        )
        .write(tmp_path / "s.jsonl")
    )
    loaded = load_claude_code_log(path)
    assert roles(loaded) == ["user", "assistant", "user", "assistant"]
    assert loaded.request_count == 1
    assert usages(loaded)[1] is None
    assert any("1 synthetic assistant message(s)" in n for n in loaded.notes)
    document = run_json("replay", str(path))
    assert document["source"]["recorded_requests"] == 1
    assert [w["provider"] for w in document["window_by_category"]] == [110, None]
    assert [r["request"] for r in document["cache"]["requests"]] == [1]


# --- bad lines ---------------------------------------------------------------------------


def test_unusable_lines_are_named_and_the_rest_is_loaded(tmp_path: Path) -> None:
    log = session_log()
    log.events.insert(2, {"type": "assistant", "uuid": "u", "sessionId": SESSION})
    log.results(result("toolu_nowhere", "lost"), text("but this stays"))
    path = log.write(tmp_path / "s.jsonl", extra_lines=("{not json", "[1, 2]"))
    loaded = load_claude_code_log(path)
    reasons = {e.line_number: e.reason for e in loaded.skipped}
    assert reasons[3] == "an assistant event without a 'message' object"
    assert "'toolu_nowhere', which no earlier tool_use has" in reasons[12]
    assert reasons[13].startswith("invalid JSON")
    assert reasons[14] == "expected a JSON event object, got list"
    assert loaded.messages[-1] == {
        "role": "user",
        "content": [text("but this stays")],
        "metadata": {"timestamp": log.events[-1]["timestamp"]},
    }
    assert "lost" not in json.dumps(loaded.messages)
    assert_sendable(loaded.messages)

    replayed = run("replay", "--full", str(path))
    assert replayed.exit_code == 0, replayed.stderr
    assert "skipped line 3: an assistant event without a 'message' object" in replayed.stderr
    strict = run("replay", "--full", str(path), "--strict")
    assert strict.exit_code == 1
    assert "line 3: an assistant event without a 'message' object" in strict.stderr
    assert "internal error" not in replayed.stderr + strict.stderr
    with pytest.raises(TranscriptError, match="line 3"):
        load_claude_code_log(path, strict=True)


def test_a_call_without_an_id_is_left_out_and_named(tmp_path: Path) -> None:
    log = Log().user("Go").response("msg_1", text("Running."), {"type": "tool_use", "name": "Bash"})
    loaded = load_claude_code_log(log.response("msg_2", text("Done.")).write(tmp_path / "s.jsonl"))
    assert roles(loaded) == ["user", "assistant", "assistant"]
    assert loaded.messages[1]["content"] == [text("Running.")]
    assert "tool_calls" not in loaded.messages[1]
    assert [(e.line_number, e.reason.split(" (")[0]) for e in loaded.skipped] == [
        (3, "1 tool_use block(s) without a string 'id' left out")
    ]
    assert_sendable(loaded.messages)


def test_a_log_with_no_message_says_what_it_held(tmp_path: Path) -> None:
    log = Log().other("summary", summary="s", leafUuid="x").user("aside", isSidechain=True)
    path = log.write(tmp_path / "s.jsonl")
    with pytest.raises(TranscriptError, match=r"1 sub-agent event\(s\) left out, 1 summary"):
        load_claude_code_log(path)
    result_ = run("replay", "--full", str(path))
    assert result_.exit_code == 1
    assert "no user or assistant message of the main conversation" in result_.stderr


def test_an_unrecognised_file_lists_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"speaker": "me", "said": "hi"}\n', encoding="utf-8")
    refused = run("replay", "--full", str(path))
    assert refused.exit_code == 1
    for name in (
        "Amplifier transcript.jsonl",
        "Amplifier session directory",
        "OpenAI-chat JSONL",
        "Claude Code session log",
    ):
        assert name in refused.stderr


# --- the command line ----------------------------------------------------------------------


def test_replay_reports_the_recorded_usage_per_request(tmp_path: Path) -> None:
    path = session_log().write(tmp_path / "s.jsonl")
    result_ = wide("replay", "--full", str(path))
    assert result_.exit_code == 0, result_.stderr
    out = result_.stdout
    assert out.startswith(f"Replayed {path}: claude-code, 6 messages")
    assert "records no system prompt and no tool definitions" in out
    assert "Recorded usage: 3 reading(s) found, 3 fed to the replay's meter" in out
    # The window table: the views' figures, the provider's occupancy beside them.
    table = out[out.index("What the window held") :]
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:8] if line.strip()}
    assert [rows[n][-3] for n in ("1", "2", "3")] == ["3,012", "3,208", "3,295"]
    assert "The figures exclude what the log does not hold" in out
    assert "Recorded input served from cache" in out
    assert "Recorded input, priced" in out


def test_json_carries_the_recorded_figures(tmp_path: Path) -> None:
    document = run_json("replay", str(session_log().write(tmp_path / "s.jsonl")))
    source = document["source"]
    assert source["format"] == "claude-code"
    assert source["recorded_requests"] == 3
    assert {s["name"]: (s["value"], s["source"]) for s in source["settings"]}["model"] == (
        MODEL,
        "session events",
    )
    assert document["window"]["context_window"] == 200_000  # the model table's, for Sonnet 4.5
    assert document["token_family"] == "claude3"
    assert [w["provider"] for w in document["window_by_category"]] == [3012, 3208, 3295]
    cache = document["cache"]["requests"]
    assert [(r["cache_read_tokens"], r["cache_write_tokens"]) for r in cache] == [
        (0, 3000),
        (3000, 200),
        (3200, 90),
    ]
    assert [r["break"] for r in cache] == [False, False, False]
    summary = document["summary"]
    assert summary["requests"] == 3
    assert summary["invalid_views"] == 0
    assert summary["host_check"] == "run"
    assert summary["host_invalid_views"] == 0
    # Sonnet 4.5 is priced: 3 USD per million fresh tokens, writes 1.25x, reads 0.1x.
    priced = 12 + 3000 * 1.25 + 8 + 200 * 1.25 + 3000 * 0.1 + 5 + 90 * 1.25 + 3200 * 0.1
    assert summary["priced_input_tokens"] == pytest.approx(priced, abs=0.1)
    assert summary["input_usd"] == pytest.approx(priced * 3 / 1e6, abs=1e-6)


def test_model_flag_wins_over_the_log(tmp_path: Path) -> None:
    path = session_log().write(tmp_path / "s.jsonl")
    document = run_json("replay", str(path), "--model", "gpt-4o")
    assert document["window"]["context_window"] == 128_000
    assert document["token_family"] == "o200k"


def test_every_command_accepts_a_log(tmp_path: Path) -> None:
    path = str(session_log().write(tmp_path / "s.jsonl"))
    for args in (
        ("replay", "--full", path, "--check"),
        ("replay", "--full", path, "--requests"),
        ("replay", "--full", path, "--overhead", "3000"),
        ("inspect", path, "--at", "2"),
        ("inspect", path, "--why", "1"),
        ("sweep", path, "--compact-threshold", "0.5,0.9"),
    ):
        done = run(*args)
        assert done.exit_code == 0, (args, done.stderr)
    view = run_json("inspect", path, "--at", "3")["view"]
    assert [m["role"] for m in view] == ["user", "assistant", "user", "assistant", "tool"]
    given = wide("replay", "--full", path, "--overhead", "3000").stdout
    assert "--overhead 3,000 stands for them" in given


# --- any conversation ----------------------------------------------------------------------

_words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=12).filter(str.strip)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns of a conversation: a user text, then responses until one without calls."""
    turns: list[dict[str, Any]] = []
    calls = 0
    # With extended thinking on, every response starts with a thinking block (the API's rule
    # for the turn that runs tools; what the model does on the others too).
    thinks = draw(st.booleans())
    for _ in range(draw(st.integers(1, 4))):
        turns.append({"user": draw(_words)})
        for _ in range(draw(st.integers(0, 3))):
            # Each signature its own, as the API's are (the oracle tells blocks apart by them).
            signed = thinking(draw(_words), f"c2ln{len(turns)}")
            blocks: list[dict[str, Any]] = [signed] if thinks else []
            if draw(st.booleans()):
                blocks.append(text(draw(_words)))
            for _ in range(draw(st.integers(1, 3))):
                calls += 1
                blocks.append(tool_use(f"toolu_{calls:03d}", command=draw(_words)))
            outputs = [
                draw(st.one_of(_words, st.builds(lambda w: [text(w)], _words)))
                for b in blocks
                if b["type"] == "tool_use"
            ]
            interleaved = draw(st.booleans())
            turns.append({"blocks": blocks, "outputs": outputs, "interleaved": interleaved})
        last = [thinking(draw(_words), f"c2ln{len(turns)}")] if thinks else []
        turns.append({"blocks": [*last, text(draw(_words))], "outputs": [], "interleaved": False})
        if draw(st.booleans()):
            turns.append({"noise": draw(st.sampled_from(["summary", "system", "sidechain"]))})
        if draw(st.booleans()):
            turns.append({"synthetic": draw(_words)})
    return turns


def _log_of(turns: list[dict[str, Any]]) -> Log:
    log = Log()
    for n, turn in enumerate(turns):
        if "user" in turn:
            log.user(turn["user"])
        elif "noise" in turn:
            if turn["noise"] == "sidechain":
                log.user("side task", isSidechain=True)
                log.response(f"msg_side_{n}", text("side answer"), isSidechain=True)
            else:
                log.other(turn["noise"])
        elif "synthetic" in turn:
            log.response(f"synthetic-{n}", text(turn["synthetic"]), model="<synthetic>")
        else:
            msg_id = f"msg_{n:03d}"
            usage = usage_of(n + 1, 10 * n, 100 * n, 5)
            pending = list(zip([b for b in turn["blocks"] if b["type"] == "tool_use"],
                               turn["outputs"], strict=True))  # fmt: skip
            for block in turn["blocks"]:
                log.response(msg_id, block, usage=usage)
                if turn["interleaved"] and block["type"] == "tool_use":
                    call, output = pending.pop(0)
                    log.results(result(call["id"], output))
            for call, output in pending:
                log.results(result(call["id"], output))
    return log


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text") or b.get("thinking") or "" for b in content]


@given(conversations())
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_conversation_round_trips(tmp_path: Path, turns: list[dict[str, Any]]) -> None:
    log = _log_of(turns)
    path = log.write(tmp_path / "s.jsonl")
    loaded = load_claude_code_log(path)
    main = [e for e in log.events if not e["isSidechain"] and e["type"] in ("user", "assistant")]

    # The same text, in the same order (the sub-agent's and the bookkeeping left out).
    expected: list[str] = []
    for event in main:
        content = event["message"]["content"]
        if isinstance(content, str):
            expected.append(content)
        else:
            for block in content:
                if block["type"] == "tool_result":
                    expected += _texts(block["content"])
                elif block["type"] != "tool_use":
                    expected += _texts([block])
    found = [t for m in loaded.messages for t in _texts(m["content"]) if t]
    assert sorted(found) == sorted(expected)
    assert [m["content"] for m in loaded.messages if m["role"] == "user"] == [
        t["user"] for t in turns if "user" in t
    ]

    # Every call answered by its result, after it; every result by a call.
    called: dict[str, int] = {}
    for index, message in enumerate(loaded.messages):
        for call in message.get("tool_calls", []):
            called[call["id"]] = index
    answered = Counter(m["tool_call_id"] for m in loaded.messages if m["role"] == "tool")
    assert set(answered) == set(called) and set(answered.values()) <= {1}
    for index, message in enumerate(loaded.messages):
        if message["role"] == "tool":
            assert called[message["tool_call_id"]] < index

    # One request per distinct real response; one recorded entry per assistant message.
    real = {e["message"]["id"] for e in main
            if e["type"] == "assistant" and e["message"]["model"] != "<synthetic>"}  # fmt: skip
    assert loaded.request_count == len(real)
    every = {e["message"]["id"] for e in main if e["type"] == "assistant"}
    assert roles(loaded).count("assistant") == len(every)  # one message per response
    assert len(list(loaded.requests())) == roles(loaded).count("assistant")
    assert sum(u is not None for u in usages(loaded)) == len(real)
    assert_sendable(loaded.messages)


@given(conversations())
@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_generated_logs_replay_with_valid_views(
    tmp_path: Path, turns: list[dict[str, Any]]
) -> None:
    # The command's own checks (check_view and the host's models) on every view, at a
    # budget small enough to compact; few examples: each is a whole command run.
    path = _log_of(turns).write(tmp_path / "s.jsonl")
    document = run_json("replay", str(path), "--context-window", "1500",
                        "--max-output-tokens", "200")  # fmt: skip
    summary = document["summary"]
    assert summary["invalid_views"] == 0
    assert summary["host_check"] == "run"
    assert summary["host_invalid_views"] == 0


# --- standard input and damaged logs -------------------------------------------------------


def test_a_log_on_standard_input(tmp_path: Path) -> None:
    text = session_log().write(tmp_path / "s.jsonl").read_text(encoding="utf-8")
    piped = run("replay", "-", "--json", input=text)
    assert piped.exit_code == 0, piped.stderr
    source = json.loads(piped.stdout)["source"]
    assert (source["name"], source["format"], source["recorded_requests"]) == (
        "standard input",
        "claude-code",
        3,
    )
    # Anything else on standard input still goes to the transcript loader.
    chat = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'
    other = run("replay", "-", "--json", input=chat)
    assert json.loads(other.stdout)["source"]["format"] == "openai-chat"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=5,
)
_PLACES: list[tuple[str | int, ...]] = [
    ("type",),
    ("isSidechain",),
    ("message",),
    ("message", "id"),
    ("message", "model"),
    ("message", "usage"),
    ("message", "usage", "input_tokens"),
    ("message", "content"),
    ("message", "content", 0),
    ("message", "content", 0, "type"),
    ("message", "content", 0, "content"),
    ("message", "content", 0, "tool_use_id"),
    ("message", "content", 0, "id"),
    ("message", "content", 0, "input"),
]


def _damage(event: dict[str, Any], place: tuple[str | int, ...], value: Any) -> None:
    """Put ``value`` at ``place`` in ``event`` where that place exists (else nothing)."""
    target: Any = event
    for step in place[:-1]:
        if isinstance(step, int):
            if not isinstance(target, list) or len(target) <= step:
                return
        elif not isinstance(target, dict) or step not in target:
            return
        target = target[step]
    last = place[-1]
    fits = isinstance(target, dict) and isinstance(last, str)
    fits |= isinstance(target, list) and isinstance(last, int) and len(target) > last
    if fits:
        target[last] = value


@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from(_PLACES), _JSON), max_size=4))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_damaged_log_is_refused_or_replayed_never_an_internal_error(
    tmp_path: Path, damage: list[tuple[int, tuple[str | int, ...], Any]]
) -> None:
    log = session_log()
    for index, place, value in damage:
        _damage(log.events[index % len(log.events)], place, value)
    path = log.write(tmp_path / "s.jsonl")
    try:
        loaded = load_claude_code_log(path)
    except TranscriptError:
        refused = run("replay", "--full", str(path))
        assert refused.exit_code == 1, refused.stderr
        return
    assert loaded.messages
    replayed = run("replay", str(path), "--json")
    assert replayed.exit_code == 0, replayed.stderr
    # A damaged block may make views the host refuses (a signed thinking block is sent as it
    # is): the report says so; it is not the loader's to mend.
    document = json.loads(replayed.stdout)
    assert document["summary"]["messages"] == len(loaded.messages)


def long_session(responses: int) -> Log:
    """One task of ``responses`` tool calls, each read returning ~1,500 characters, its usage
    what the provider would report: a 3,000-token system prompt and the conversation so far
    (about four characters a token), the previous request read from the cache."""
    log = Log().user("Read every file and summarise them.")
    sent, previous = 3_000 + 10, 0
    for n in range(1, responses + 1):
        call = f"toolu_{n:03d}"
        log.response(
            f"msg_{n:03d}",
            tool_use(call, "Read", file_path=f"/p/f{n}.py"),
            usage=usage_of(3, sent - previous - 3, previous, 40),
        )
        output = f"{n}: " + "def f(x): return x * 2  # a line of code\n" * 36
        log.results(result(call, output))
        previous, sent = sent, sent + 60 + len(output) // 4
    return log.response(
        "msg_end", text("All read."), usage=usage_of(3, sent - previous, previous, 9)
    )


def test_usage_after_the_views_part_from_the_log_is_kept_from_the_meter(tmp_path: Path) -> None:
    # The log's usage answered the whole conversation; once the replay's views leave messages
    # out, a reading paired with them would show an overhead that is not there.
    path = long_session(100).write(tmp_path / "s.jsonl")
    document = run_json(
        "replay", "--full", str(path), "--context-window", "40000", "--max-output-tokens", "4000"
    )
    # Every ~22 requests, as the history grows back (fed every reading: 37, one per request
    # from the 64th on).
    assert [c["request"] for c in document["compactions"]] == [47, 69, 91]
    withheld = [n for n in document["source"]["session_notes"] if "not given to the" in n]
    assert len(withheld) == 1
    # Every reading still reaches the report.
    assert all(w["provider"] is not None for w in document["window_by_category"])


def test_the_overhead_given_is_held_back_for_a_log_too(tmp_path: Path) -> None:
    # --overhead stands for what the log does not hold: held back by the replayed budget for
    # every format, as a bare transcript's is (it used to fill only the window table).
    log = str(session_log().write(tmp_path / "s.jsonl"))
    plain = json.loads(wide("replay", log, "--json").stdout)["budget"]
    given = json.loads(wide("replay", log, "--overhead", "5000", "--json").stdout)["budget"]
    assert plain["tool_definitions_tokens"] == 0
    assert given["tool_definitions_tokens"] == 5_000
    assert given["request_budget"] == plain["request_budget"]
