"""What the window held, by category (replay/payloads/payload.py), the payload matched to the
transcript (replay/payloads/payload_match.py) and its table (replay/output/window_tables.py), on
synthetic payloads and on the recorded session."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from amplifier_module_context_simple import ContextConfig, estimate_message_tokens
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.output.window_tables import render_window
from amplifier_module_context_simple.replay.payloads.payload import (
    UsageComparison,
    breakdown,
    compare,
    transcript_breakdown,
)
from amplifier_module_context_simple.replay.payloads.payload_match import align, text_match
from amplifier_module_context_simple.replay.recordings.session_dir import read_session

from .session_payloads import SESSION_DIR, recorded, transcript

REMINDER = (
    '<system-reminder source="hooks-status-context">\nWorking directory: /workspace\n'
    "Platform: linux\n</system-reminder>"
)
TOOL = {
    "name": "bash",
    "description": "Run a shell command and return its output.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": "Check the host at 10.0.0.5 and write notes for next time."},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Looking at the ports."}],
        "tool_calls": [{"id": "call_1", "tool": "bash", "arguments": {"command": "ss -ltn"}}],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "bash",
        "content": "State Local\nLISTEN 10.0.0.5:8080\nLISTEN 10.0.0.5:9714\n",
    },
    {"role": "assistant", "content": "Two ports listen: 8080 and 9714."},
]


def anthropic(*messages: dict[str, Any], system: str = "You are a careful agent.") -> dict:
    return {
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "tools": [TOOL],
        "messages": list(messages),
        "max_tokens": 1000,
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call() -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ss"}}
        ],
    }


def result(text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "call_1", "content": text}
    return {"role": "user", "content": [block]}


def window(payload: dict, history: list[dict[str, Any]] = TRANSCRIPT, **kw: Any):
    return breakdown(
        payload, history, family="claude47", context_window=kw.pop("context_window", 200_000),
        max_output=kw.pop("max_output", 8_000), **kw,
    )  # fmt: skip


PROMPT = TRANSCRIPT[0]["content"]
OUTPUT = TRANSCRIPT[2]["content"]


def test_text_appended_inside_a_tool_result_is_an_injection_attached_to_that_result() -> None:
    payload = anthropic(user(PROMPT), call(), result(OUTPUT + "\n\n" + REMINDER))
    b = window(payload)
    [injection] = b.injections
    assert (injection.message_index, injection.block_index, injection.position) == (2, 0, 2)
    assert injection.start == len(OUTPUT)
    assert injection.first_line == '<system-reminder source="hooks-status-context">'
    assert injection.tokens == estimate_message_tokens({"content": "\n\n" + REMINDER}) - 4
    assert [m.positions for m in b.messages] == [(0,), (1,), (2,)]
    # Each payload message is priced once: conversation plus injections is its estimate.
    total = sum(estimate_message_tokens(m, family="claude47") for m in payload["messages"])
    assert b.conversation + b.injected == total


def test_a_message_that_is_only_an_injection_is_one_whole_injection() -> None:
    injected = {"role": "user", "content": [{"type": "text", "text": REMINDER}]}
    b = window(anthropic(user(PROMPT), injected))
    [injection] = b.injections
    assert (injection.message_index, injection.block_index, injection.position) == (1, None, None)
    assert injection.tokens == estimate_message_tokens(injected, family="claude47")
    assert b.conversation == estimate_message_tokens(user(PROMPT), family="claude47")


def test_a_redacted_copy_of_the_transcript_text_is_conversation_with_an_edit() -> None:
    redacted = PROMPT.replace("10.0.0.5", "[REDACTED:PII]")
    output = OUTPUT.replace("10.0.0.5", "[REDACTED:PII]")
    b = window(anthropic(user(redacted), call(), result(output + "\n\n" + REMINDER)))
    assert [m.edited for m in b.messages] == [True, False, True]
    [injection] = b.injections  # the reminder only: the redactions are not injections
    assert injection.start == len(output)


def test_user_text_the_transcript_does_not_hold_is_an_injection() -> None:
    b = window(anthropic(user("Remember: the deploy freeze starts at noon."), user(PROMPT)))
    assert [(i.message_index, i.block_index) for i in b.injections] == [(0, None)]
    assert b.messages[1].positions == (0,)


def test_the_text_rule() -> None:
    assert text_match("abc", "abc") == (True, 3)
    assert text_match("abc\n\n<x>tail", "abc") == (True, 3)
    assert text_match("host [REDACTED:PII] up", "host 10.1.2.3 up") == (True, 22)
    # A reminder the transcript itself holds is conversation; only a later one is injected.
    held = f"{REMINDER}\nreal text"
    assert text_match(f"{held}\n{REMINDER}", held) == (True, len(held))
    _, start = text_match(f"[truncated]{held}\n{REMINDER}", held)
    assert start == len(f"[truncated]{held}")
    assert text_match("x" * 95 + "yyyyy", "x" * 100) == (True, 100)  # one small edit
    assert text_match("entirely different", "the transcript text")[0] is False


def test_the_compaction_notice_in_the_payload_is_its_own_category() -> None:
    notice = user('<system-reminder source="context-compaction">\nEarlier conversation...\n'
                  "</system-reminder>")  # fmt: skip
    b = window(anthropic(user(PROMPT), notice), notice_tokens=999)
    assert b.injections == ()
    assert b.notice == estimate_message_tokens(notice, family="claude47")
    assert window(anthropic(user(PROMPT)), notice_tokens=999).notice == 999


def test_the_openai_chat_shape() -> None:
    payload = {
        "messages": [
            {"role": "system", "content": "You are a careful agent."},
            user(PROMPT),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ss"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": OUTPUT + "\n" + REMINDER},
        ],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    }
    b = window(payload)
    assert b.system == estimate_message_tokens(payload["messages"][0], family="claude47")
    assert b.tools > 0
    assert [(i.message_index, i.block_index, i.position) for i in b.injections] == [(3, 0, 2)]
    assert [m.positions for m in b.messages] == [(0,), (1,), (2,)]


def test_compare_puts_the_provider_occupancy_beside_ours() -> None:
    b = window(anthropic(user(PROMPT)))
    c = compare(b, {"input_tokens": 1_000, "cache_read_tokens": 900, "cache_write_tokens": 50})
    assert c is not None
    assert (c.ours, c.provider, c.gap) == (b.used, 1_050, b.used - 1_050)
    assert c.gap_share == pytest.approx((b.used - 1_050) / 1_050)
    assert compare(b, {"output_tokens": 5}) is None

    @dataclass
    class Usage:  # a parsed usage record reads the same as the event's mapping
        input_tokens: int
        cache_write_tokens: int | None

    assert compare(b, Usage(1_000, None)) == UsageComparison(b.used, 1_000)


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    texts = st.text(min_size=0, max_size=200)
    messages: list[dict[str, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["prompt", "reminder", "call"]), max_size=6)):
        if kind == "prompt":
            messages.append(user(draw(texts)))
        elif kind == "reminder":
            messages.append(user(REMINDER + draw(texts)))
        else:
            messages += [call(), result(OUTPUT + draw(st.sampled_from(["", REMINDER])))]
    return anthropic(*messages, system=draw(texts))


@given(payloads(), st.integers(0, 50_000), st.integers(1, 300_000))
def test_categories_free_space_and_output_reserve_add_up_to_the_window(
    payload: dict[str, Any], reserve: int, context_window: int
) -> None:
    b = window(payload, context_window=context_window, max_output=reserve)
    assert b.used + b.free + b.max_output - b.over == context_window
    if not b.over:
        assert sum(tokens for _, tokens in b.categories()) == context_window
    total = sum(estimate_message_tokens(m, family="claude47") for m in payload["messages"])
    assert b.conversation + b.injected == total


def test_a_bare_transcript_counts_the_given_overhead_and_says_what_it_excludes() -> None:
    b = transcript_breakdown(
        TRANSCRIPT, overhead=40_000, family="claude47", context_window=200_000, max_output=8_000
    )
    labels = [label for label, _ in b.categories()]
    assert labels[0] == "overhead (given)"
    assert "system prompt" not in labels
    assert b.used == 40_000 + sum(estimate_message_tokens(m, family="claude47") for m in TRANSCRIPT)
    console = Console(width=80, record=True)
    render_window(console, [b])
    text = console.export_text()
    assert "The figures exclude what was not given" in text
    assert "--overhead 40,000" in text


def test_the_overhead_option_is_accepted() -> None:
    done = CliRunner().invoke(app, ["replay", "--messages", "20", "--overhead", "5000"])
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize("overhead", ["99999999999", "100000000", "128000"])
def test_an_overhead_no_request_could_carry_is_refused_naming_the_window(overhead: str) -> None:
    # The example's window is 128,000 tokens; the stand-in held back would be text that size.
    done = CliRunner().invoke(app, ["replay", "--messages", "20", "--overhead", overhead])
    assert done.exit_code == 1
    assert "internal error" not in done.stderr
    assert f"--overhead {int(overhead):,} is more than any request can carry" in done.stderr
    assert "below the context window (128,000 tokens)" in done.stderr


def test_without_a_window_the_overhead_is_held_to_the_fallback_budget(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n", encoding="utf-8")
    fallback = ContextConfig().max_tokens_fallback
    refused = CliRunner().invoke(app, ["replay", str(path), "--overhead", str(fallback)])
    assert refused.exit_code == 1
    assert f"below max_tokens_fallback (no window is known) ({fallback:,} tokens)" in (
        refused.stderr
    )
    below = CliRunner().invoke(app, ["replay", str(path), "--overhead", str(fallback - 1)])
    assert below.exit_code == 0, below.stderr


def _uncut(text: str, cells: list[str]) -> None:
    for cell in cells:
        assert re.search(rf"(?<![\d,]){re.escape(cell)}(?![\d,])", text), cell


def test_the_window_table_at_80_columns_cuts_no_number_or_header() -> None:
    payload = anthropic(user(PROMPT), call(), result(OUTPUT + "\n\n" + REMINDER))
    b = window(payload, context_window=1_000_000, max_output=128_000)
    usage = {"input_tokens": 67_192, "cache_read_tokens": 67_190, "cache_write_tokens": 12_120}
    comparison = compare(b, usage)
    console = Console(width=80, record=True)
    render_window(console, [b, b], [comparison, comparison])
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert comparison is not None
    _uncut(text, [f"{b.system:,}", f"{b.tools:,}", f"{b.used:,}", "79,312", f"{b.free:,}"])
    for header in ("req", "system", "tools", "msgs", "injected", "ours", "provider", "gap %"):
        assert re.search(rf"(?<!\S){re.escape(header)}(?!\S)", text), header
    assert "…" not in text.split("ephemeral injections (in the payload")[0]


needs_session = pytest.mark.skipif(
    not SESSION_DIR.is_dir(), reason="the shared recorded session is absent"
)


@needs_session
def test_the_recorded_session_adds_up_to_the_provider_occupancy_within_5_percent() -> None:
    payloads, usages = recorded(SESSION_DIR)
    history = transcript(SESSION_DIR)
    assert len(payloads) == len(usages) == 9
    for number, (payload, usage) in enumerate(zip(payloads, usages, strict=True), 1):
        b = breakdown(
            payload, history, family="claude47", context_window=1_000_000,
            max_output=payload["max_tokens"],
        )  # fmt: skip
        comparison = compare(b, usage)
        assert comparison is not None
        assert comparison.provider == usage["input_tokens"] + usage.get("cache_write_tokens", 0)
        assert comparison.gap_share is not None and abs(comparison.gap_share) < 0.05, number
        [injection] = b.injections
        assert injection.first_line == '<system-reminder source="hooks-status-context">'
        if number == 1:  # a user message of its own
            assert (injection.message_index, injection.block_index) == (1, None)
        else:  # appended inside the last tool result
            last = len(payload["messages"]) - 1
            assert (injection.message_index, injection.block_index) == (last, 0)
            assert injection.position == last
    assert comparison.provider == 79_312


@needs_session
def test_the_recorded_session_matches_every_payload_message_to_the_transcript() -> None:
    payloads, _ = recorded(SESSION_DIR)
    aligned = align(payloads[-1], transcript(SESSION_DIR), family="claude47")
    assert [m.positions for m in aligned.messages] == [(i,) for i in range(17)]
    # Messages 0 and 4 carry [REDACTED:PII] where the transcript has addresses.
    assert [m.index for m in aligned.messages if m.edited] == [0, 4]


def test_a_prompt_kept_after_many_left_out_turns_is_found_and_its_tail_injected() -> None:
    history: list[dict[str, Any]] = []
    for turn in range(40):
        history += [user(f"Prompt number {turn}: do step {turn}."), {"role": "assistant",
                    "content": f"Done with step {turn}."}]  # fmt: skip
    payload = anthropic(user(history[0]["content"]), user(history[78]["content"] + REMINDER))
    b = window(payload, history)
    assert [m.positions for m in b.messages] == [(0,), (78,)]
    assert [(i.message_index, i.block_index, i.position) for i in b.injections] == [(1, 0, 78)]


def test_a_result_whose_id_the_view_renamed_is_matched_in_order() -> None:
    renamed = {"type": "tool_use", "id": "call_1__2", "name": "bash", "input": {"command": "ss"}}
    result_block = {"type": "tool_result", "tool_use_id": "call_1__2", "content": OUTPUT + REMINDER}
    payload = anthropic(
        user(PROMPT),
        {"role": "assistant", "content": [renamed]},
        {"role": "user", "content": [result_block]},
    )
    b = window(payload)
    assert [m.positions for m in b.messages] == [(0,), (1,), (2,)]
    assert [(i.message_index, i.position, i.start) for i in b.injections] == [(2, 2, len(OUTPUT))]


@needs_session
def test_the_session_reader_records_feed_the_breakdown_and_the_comparison() -> None:
    session = read_session(SESSION_DIR)
    history = transcript(SESSION_DIR)
    gaps = []
    for request in session.requests():
        b = breakdown(
            request.payload, history, family="claude47", context_window=1_000_000,
            max_output=request.payload["max_tokens"],
        )  # fmt: skip
        comparison = compare(b, request.usage)
        assert comparison is not None and request.usage is not None
        assert comparison.provider == request.usage.occupancy
        gaps.append(comparison.gap_share)
    assert len(gaps) == 9
    assert all(g is not None and abs(g) < 0.05 for g in gaps)
