"""The layouts people have: a Claude Code project folder, a Claude Code session id, a directory
that holds only an events file, and OpenAI-chat JSONL with one conversation per line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple.replay.recordings.transcripts import ACCEPTED_LAYOUTS

from .cli_runs import run, run_json
from .test_claude_code_log import Log, text, usage_of
from .test_session_report import make_session


def claude_log(path: Path, said: str, *, mtime: int) -> Path:
    """A two-request Claude Code log whose first prompt is ``said``, modified at ``mtime``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    (
        Log()
        .user(said)
        .response("msg_1", text("Hi"), usage=usage_of(10, 500, 0, 5))
        .user("More")
        .response("msg_2", text("Done."), usage=usage_of(10, 0, 500, 5))
        .write(path)
    )
    os.utime(path, (mtime, mtime))
    return path


def project(folder: Path) -> tuple[Path, Path]:
    """A project folder with an older and a newer log (and a file that is no log)."""
    older = claude_log(folder / "aaaa1111-old.jsonl", "old session", mtime=1_000_000)
    newer = claude_log(folder / "bbbb2222-new.jsonl", "new session", mtime=2_000_000)
    (folder / "notes.jsonl").write_text('{"note": 1}\n', encoding="utf-8")
    return older, newer


def test_a_project_folder_lists_its_logs_and_replays_the_newest(tmp_path: Path) -> None:
    folder = tmp_path / "-home-dev-project"
    older, newer = project(folder)
    result = run("replay", str(folder), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["source"]["name"] == str(newer)
    # The listing names both logs, newest first, and how to pick another.
    listing = result.stderr
    assert "Claude Code project folder with 2 session log(s)" in listing
    assert listing.index("bbbb2222-new") < listing.index("aaaa1111-old")
    assert f"{folder}/<session id>" in listing
    # The one named, by the start of its id, inside the folder.
    named = run_json("replay", str(folder / "aaaa"))
    assert named["source"]["name"] == str(older)
    assert named["source"]["format"] == "claude-code"


def test_a_start_shared_by_two_logs_of_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    claude_log(folder / "abc-1.jsonl", "one", mtime=1_000_000)
    claude_log(folder / "abc-2.jsonl", "two", mtime=1_000_001)
    result = run("replay", str(folder / "abc"))
    assert result.exit_code == 1
    assert "ambiguous" in result.stderr and "abc-1" in result.stderr and "abc-2" in result.stderr


def test_a_claude_code_session_id_is_found_under_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    _, newer = project(tmp_path / ".claude" / "projects" / "-home-dev-project")
    assert run_json("replay", "bbbb2222")["source"]["name"] == str(newer)
    missing = run("replay", "cccc")
    assert missing.exit_code == 1
    # Both homes are named, each with what it holds.
    assert ".amplifier/projects/*/sessions/ (0 session(s) there)" in missing.stderr
    assert ".claude/projects/*/ (3 log(s) there)" in missing.stderr


def test_an_id_matching_in_both_homes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    make_session(tmp_path / ".amplifier" / "projects" / "p" / "sessions" / "dddd-amp")
    claude_log(tmp_path / ".claude" / "projects" / "p" / "dddd-cc.jsonl", "x", mtime=1_000_000)
    result = run("replay", "dddd")
    assert result.exit_code == 1
    assert "ambiguous" in result.stderr and "dddd-amp" in result.stderr
    assert "1 Claude Code log(s) match too" in result.stderr
    # An exact id wins over a longer one it begins.
    claude_log(tmp_path / ".claude" / "projects" / "p" / "dddd-cc-2.jsonl", "y", mtime=1_000_000)
    assert run_json("replay", "dddd-cc")["source"]["name"].endswith("dddd-cc.jsonl")
    # The full id of either is not ambiguous.
    assert run_json("replay", "dddd-cc")["source"]["format"] == "claude-code"


def test_a_directory_holding_only_events_names_every_layout(tmp_path: Path) -> None:
    directory = tmp_path / "session"
    directory.mkdir()
    (directory / "events.jsonl").write_text('{"event": "x", "data": {}}\n', encoding="utf-8")
    result = run("replay", str(directory))
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "holds an events.jsonl but no transcript.jsonl" in message
    assert ACCEPTED_LAYOUTS in message


def conversation(question: str) -> dict[str, Any]:
    """A fine-tuning line: system, user, an OpenAI-style call, its result, an answer."""
    function = {"name": "read", "arguments": json.dumps({"path": "src/app.py"})}
    call = {"id": "c1", "type": "function", "function": function}
    return {
        "messages": [
            {"role": "system", "content": "You read files."},
            {"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "def main(): pass"},
            {"role": "assistant", "content": "It defines main."},
        ],
        "parallel_tool_calls": False,
    }


def test_one_conversation_per_line_is_read(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(conversation("What is in app.py?")) + "\n", encoding="utf-8")
    document = run_json("replay", str(path))
    assert document["source"]["format"] == "openai-chat"
    assert (document["source"]["conversation"], document["source"]["conversations"]) == (1, 1)
    assert document["summary"]["requests"] == 2 and document["summary"]["invalid_views"] == 0
    assert document["source"]["messages"] == 5


def test_several_conversations_need_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    lines = [json.dumps(conversation(f"question {i}")) for i in range(1, 4)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    refused = run("replay", str(path))
    assert refused.exit_code == 1
    assert "holds 3 conversations (one per line): choose one with --conversation N (1-3)" in (
        refused.stderr
    )
    chosen = run_json("replay", str(path), "--conversation", "2")
    assert (chosen["source"]["conversation"], chosen["source"]["conversations"]) == (2, 3)
    past = run("replay", str(path), "--conversation", "4")
    assert past.exit_code == 1 and "--conversation 4 is past the end" in past.stderr
    two = tmp_path / "two.jsonl"
    two.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    assert "holds 2 conversations" in run("replay", str(two)).stderr
    # Standard input reads the same layout.
    piped = run("replay", "-", "--conversation", "3", "--json", input=path.read_text())
    assert piped.exit_code == 0, piped.stderr
    assert json.loads(piped.stdout)["source"]["conversation"] == 3


def test_a_bad_message_of_a_conversation_is_named_by_its_place(tmp_path: Path) -> None:
    line = conversation("q")
    line["messages"].insert(1, {"content": "no role"})
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    result = run("replay", str(path), "--json")
    document = json.loads(result.stdout)
    assert document["source"]["skipped_lines"] == [{"line": 2, "reason": "no 'role' key"}]
    assert "skipped message 2: no 'role' key" in result.stderr  # a message, not a line
    strict = run("replay", str(path), "--strict")
    assert strict.exit_code == 1
    assert "conversation 1: message 2: no 'role' key" in strict.stderr


def test_the_conversation_flag_on_another_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    result = run("replay", str(path), "--conversation", "1")
    assert result.exit_code == 1 and "--conversation applies only" in result.stderr


def test_help_names_every_layout() -> None:
    result = run("replay", "--help")
    assert result.exit_code == 0
    shown = " ".join(result.stdout.replace("│", " ").split())
    for layout in ("Amplifier session directory", "OpenAI-chat JSONL", '{"messages": [...]}',
                   "Claude Code session log", "project folder", "--conversation"):  # fmt: skip
        assert layout in shown, layout
