"""Rework after the session's own compactions, on hand-made recordings whose answers are worked
out by hand below: a Claude Code log that compacted once, and an Amplifier session whose events
record one compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from amplifier_module_context_simple import ContextConfig, estimate_message_tokens
from amplifier_module_context_simple.replay.engine.report import ReplayReport
from amplifier_module_context_simple.replay.findings.rework import (
    FROM_EVENTS,
    FROM_LOG,
    RepeatedCall,
    Rework,
    ReworkSpan,
    find_rework,
    log_compactions,
)
from amplifier_module_context_simple.replay.output.evidence_output import render_evidence
from amplifier_module_context_simple.replay.output.row_caps import COMPACTION_ROWS
from amplifier_module_context_simple.replay.provider.pricing import prices_for
from amplifier_module_context_simple.replay.recordings.claude_code_log import load_claude_code_log

from .cli_runs import run, run_json
from .test_claude_code_log import MODEL, Log, result, text, tool_use, usage_of

APP = "/p/src/app.py"
PYTEST = "pytest tests/test_app.py"


def compacted_log(path: Path) -> Path:
    """Read app.py, run the tests, answer; Claude Code compacts; read app.py again (a repeat),
    read the test file (new), run the tests again (a repeat), answer.

    Messages: 0 user, 1 call Read app.py, 2 result, 3 call Bash pytest, 4 result, 5 answer,
    6 summary, 7 user, 8 call Read app.py, 9 result, 10 call Read test file, 11 result,
    12 call Bash pytest, 13 result, 14 answer. Requests are the assistant messages: 1 (1),
    2 (3), 3 (5), 4 (8), 5 (10), 6 (12), 7 (14); the first after the compaction is 4.
    """
    return (
        Log()
        .user("Fix the bug in app.py")
        .response("msg_1", tool_use("t1", "Read", file_path=APP), usage=usage_of(10, 900, 0, 5))
        .results(result("t1", "x = 1\n" * 30))
        .response("msg_2", tool_use("t2", "Bash", command=PYTEST), usage=usage_of(10, 90, 900, 5))
        .results(result("t2", "1 passed"))
        .response("msg_3", text("Fixed."), usage=usage_of(10, 50, 990, 5))
        .other("system", subtype="compact_boundary", content="Conversation compacted")
        .user("This session is being continued ... Summary: fixed app.py.", isCompactSummary=True)
        .user("Now add a test")
        .response("msg_4", tool_use("t3", "Read", file_path=APP), usage=usage_of(10, 300, 0, 5))
        .results(result("t3", "x = 1\n" * 30))
        .response(
            "msg_5",
            tool_use("t4", "Read", file_path="/p/tests/test_app.py"),
            usage=usage_of(10, 90, 300, 5),
        )
        .results(result("t4", "def test(): pass"))
        .response("msg_6", tool_use("t5", "Bash", command=PYTEST), usage=usage_of(10, 40, 390, 5))
        .results(result("t5", "2 passed"))
        .response("msg_7", text("Added."), usage=usage_of(10, 20, 430, 5))
        .write(path)
    )


def test_a_claude_code_log_s_repeats_after_its_compaction(tmp_path: Path) -> None:
    log = load_claude_code_log(compacted_log(tmp_path / "s.jsonl"))
    assert log_compactions(log) == [4]
    document = run_json("replay", str(tmp_path / "s.jsonl"))
    family = document["token_family"]
    found = find_rework(
        log.messages, [4], source=FROM_LOG, family=family, model=MODEL, recorded=log.compactions
    ).as_json()
    assert [(c["after_request"], c["trigger"]) for c in found["recorded"]] == [(3, None)]
    t3, t5 = log.messages[9], log.messages[13]
    assert (t3["tool_call_id"], t5["tool_call_id"]) == ("t3", "t5")
    tokens = [estimate_message_tokens(m, family=family) for m in (t3, t5)]
    (span,) = found["spans"]
    assert (span["request"], span["position"], span["calls"]) == (4, 8, 3)
    assert [
        (r["position"], r["request"], r["tool"], r["argument"], r["first_position"], r["tokens"])
        for r in span["repeated"]
    ] == [(8, 4, "Read", APP, 1, tokens[0]), (12, 6, "Bash", PYTEST, 3, tokens[1])]
    # Written once to the cache: 1.25 base-price tokens each, at the model's price.
    prices = prices_for(MODEL)
    assert prices.base_per_mtok is not None and prices.write == 1.25
    assert found["tokens"] == sum(tokens) and found["repeated_calls"] == 2
    assert found["priced_tokens"] == round(sum(tokens) * 1.25, 1)
    assert found["usd"] == round(sum(tokens) * 1.25 * prices.base_per_mtok / 1e6, 6)
    # The command reports the same, in --json and in words.
    assert document["rework"] == found
    words = " ".join(run("replay", "--full", str(tmp_path / "s.jsonl")).stdout.split())
    assert "Rework after the session's own compactions (claude-code compact_boundary): 2 " in words
    assert f"after request 4: 2 of 3 call(s) repeat earlier ones, {sum(tokens):,} tokens" in words


def test_a_log_that_never_compacted_has_no_span(tmp_path: Path) -> None:
    path = (
        Log()
        .user("Hi")
        .response("msg_1", tool_use("t1", "Read", file_path=APP))
        .results(result("t1", "x"))
        .response("msg_2", tool_use("t2", "Read", file_path=APP))
        .results(result("t2", "x"))
        .response("msg_3", text("Done."))
        .write(tmp_path / "s.jsonl")
    )
    rework = run_json("replay", str(path))["rework"]
    # The same call twice, but no compaction between: no rework.
    assert rework == {"source": FROM_LOG, "compactions": 0, "repeated_calls": 0, "tokens": 0,
                      "priced_tokens": 0.0, "usd": 0.0, "spans": [], "recorded": []}  # fmt: skip


def amplifier_session(directory: Path) -> Path:
    """ls src, cat app.py, ls src again (before the compaction: no rework), then the session
    compacts at request 4: cat app.py (repeats position 3), ls src (repeats position 5, the
    latest before the compaction), answer.

    Messages: 0 user, 1 call (request 1), 2, 3 call (2), 4, 5 call (3), 6, 7 call (4), 8,
    9 call (5), 10, 11 answer (6).
    """

    def call(n: int, command: str) -> list[dict[str, Any]]:
        calls = [{"id": f"c{n}", "tool": "bash", "arguments": {"command": command}}]
        return [
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{n}", "name": "bash", "content": f"out {n} " * 50},
        ]

    messages: list[dict[str, Any]] = [{"role": "user", "content": "Survey the build."}]
    for n, command in enumerate(["ls src", "cat src/app.py", "ls src", "cat src/app.py", "ls src"]):
        messages += call(n, command)
    messages.append({"role": "assistant", "content": "Done."})
    directory.mkdir(parents=True)
    transcript = "".join(json.dumps(m) + "\n" for m in messages)
    (directory / "transcript.jsonl").write_text(transcript, encoding="utf-8")

    def event(name: str, data: dict[str, Any]) -> str:
        return json.dumps({"ts": "t", "lvl": "INFO", "event": name, "data": data}) + "\n"

    request = event("llm:request", {"raw": {"messages": []}})
    compaction = event("context:compaction", {"strategy_level": 3})
    after = event("context:post_compact", {"strategy_level": 3})
    (directory / "events.jsonl").write_text(
        request * 3 + compaction + after + request * 3, encoding="utf-8"
    )
    return directory


def test_an_amplifier_session_s_recorded_compaction(tmp_path: Path) -> None:
    directory = amplifier_session(tmp_path / "s")
    rework = run_json("replay", str(directory))["rework"]
    assert rework["source"] == FROM_EVENTS and rework["compactions"] == 1
    (span,) = rework["spans"]
    assert (span["request"], span["position"], span["calls"]) == (4, 7, 2)
    found = [
        (r["position"], r["request"], r["tool"], r["argument"], r["first_position"])
        for r in span["repeated"]
    ]
    assert found == [(7, 4, "bash", "cat src/app.py", 3), (9, 5, "bash", "ls src", 5)]
    # No model price known for this session: token equivalents at the default multipliers.
    result_tokens = [r["tokens"] for r in span["repeated"]]
    assert all(t > 0 for t in result_tokens) and rework["tokens"] == sum(result_tokens)
    assert rework["priced_tokens"] == round(sum(result_tokens) * 1.25, 1)
    assert rework["usd"] is None


def test_a_bare_transcript_has_no_rework(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n',
        encoding="utf-8",
    )
    assert run_json("replay", str(path))["rework"] is None


def test_the_text_shows_the_largest_spans_and_says_how_many_more() -> None:
    spans = [
        ReworkSpan(n, n, 1, [RepeatedCall(n, n, "read", f"f{n}.py", 0, n)], n, n * 1.25, None)
        for n in range(1, COMPACTION_ROWS + 6)
    ]
    report = ReplayReport(source={}, config=ContextConfig(), window=None)
    report.rework = Rework(FROM_LOG, spans)
    console = Console(record=True, width=200)
    render_evidence(console, report)
    text = console.export_text()
    assert "… 5 more compactions (smaller); see --json" in text
    assert "after request 1:" not in text and f"after request {COMPACTION_ROWS + 5}:" in text
