"""Figures that add up: tokens not sent are never negative, what a log does not hold is its own
category (never free space), and a window the tool did not know is called a guess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.replay.payloads.payload import NOT_IN_LOG

from .cli_runs import run, run_json
from .test_claude_code_log import session_log


def _interrupted(calls: int, length: int) -> list[dict[str, Any]]:
    """A session whose every call was interrupted: no result was ever stored."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the build"}]
    for i in range(calls):
        call = {"id": f"c{i}", "tool": "bash", "name": "bash", "arguments": {"command": "make"}}
        messages.append({"role": "assistant", "content": "x" * length, "tool_calls": [call]})
        messages.append({"role": "user", "content": f"go on {i}"})
    messages.append({"role": "assistant", "content": "done"})
    return messages


@settings(max_examples=8, deadline=None)
@given(st.integers(min_value=1, max_value=30), st.integers(min_value=0, max_value=40))
def test_placeholders_for_interrupted_calls_never_make_tokens_not_sent_negative(
    calls: int, length: int
) -> None:
    text = "".join(json.dumps(m) + "\n" for m in _interrupted(calls, length))
    result = run("replay", "-", "--json", input=text)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert all(r["repaired"] >= 1 for r in document["requests"][1:])  # placeholders were added
    for r in document["requests"]:
        sent = r["view_tokens"] - r["system_prompt_tokens"] - r["added_tokens"]
        assert 0 <= sent <= r["history_tokens"], r
    summary = document["summary"]
    assert summary["final_tokens_saved"] >= 0 and summary["tokens_saved"] >= 0
    # Nothing compacted: every history token was sent, so nothing was "not sent".
    assert summary["compactions"] == 0 and summary["tokens_saved"] == 0


def test_what_a_log_does_not_hold_takes_room_and_is_no_free_space(tmp_path: Path) -> None:
    log = str(session_log().write(tmp_path / "s.jsonl"))
    document = run_json("replay", log)
    for entry in document["window_by_category"]:
        categories = entry["categories"]
        unlogged = entry["provider"] - sum(
            v for k, v in categories.items() if k not in (NOT_IN_LOG, "free space",
                                                         "kept back for output")
        )  # fmt: skip
        assert categories[NOT_IN_LOG] == max(0, unlogged)
        assert entry["used"] == entry["provider"]  # the provider's own figure, all of it
        window = document["window"]["context_window"]
        assert entry["used"] + categories["free space"] + categories["kept back for output"] == (
            window
        )
    text = " ".join(run("replay", "--full", log).stdout.replace("│", " ").split())
    assert NOT_IN_LOG in text and "never free space" in text


def test_a_window_nobody_gave_is_called_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path.write_text("".join(json.dumps(m) + "\n" for m in turns), encoding="utf-8")
    first = " ".join(run("replay", str(path)).stdout.split())
    assert "No window known" in first and "a guess" in first
    assert "Window 200,000" not in first
    full = " ".join(run("replay", "--full", str(path)).stdout.split())
    assert "Window 200,000 tokens;" not in full
    assert "none known: its place is taken by the 200,000-token budget" in full
    given = " ".join(run("replay", str(path), "--context-window", "64000").stdout.split())
    assert "Window 64,000 tokens (given)" in given and "guess" not in given
