"""What the tool definitions and the system prompt are made of: per tool, per recorded part."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.payloads.space_parts import system_parts, tool_parts
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions

from .cli_runs import run, run_json
from .test_session_report import REAL_SESSION, make_session

FAMILY = "claude47"


def _tool(name: str, words: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return {"name": name, "description": "Reads a file. " * words, "input_schema": schema}


def _alone(tool: dict[str, Any]) -> int:
    return estimate_tool_definitions([tool], FAMILY)


def _context_file(path: str, body: str) -> str:
    return f'<context_file paths="{path} → /root/.amplifier/cache/x/{path}">\n{body}\n'


names = st.text(alphabet="abcdefghij_", min_size=1, max_size=12)


@given(st.lists(st.tuples(names, st.integers(0, 200)), min_size=1, max_size=12))
def test_every_tool_is_named_once_with_its_own_estimate_largest_first(
    specs: list[tuple[str, int]],
) -> None:
    tools = [_tool(name, words) for name, words in specs]
    parts = tool_parts(tools, FAMILY)
    assert sorted(p.name for p in parts) == sorted(name for name, _ in specs)
    assert [p.tokens for p in parts] == sorted((p.tokens for p in parts), reverse=True)
    assert sorted(p.tokens for p in parts) == sorted(_alone(t) for t in tools)
    # Priced alone, each counts the framing the whole list counts once: a little more, never less.
    whole = estimate_tool_definitions(tools, FAMILY)
    assert whole <= sum(p.tokens for p in parts) <= whole + 8 * len(tools)


def test_an_openai_tool_is_named_by_its_function() -> None:
    tool = {"type": "function", "function": {"name": "grep", "parameters": {}}}
    (part,) = tool_parts([tool], FAMILY)
    assert part.name == "grep" and part.tokens == estimate_tool_definitions([tool], FAMILY)


bodies = st.text(alphabet="abc def\n#", min_size=0, max_size=400)


@given(bodies, st.lists(st.tuples(st.sampled_from(["a:x.md", "b:y/z.md", "/abs/p.md"]), bodies)))
def test_the_system_prompt_splits_at_each_context_file(
    head: str, files: list[tuple[str, str]]
) -> None:
    pieces = [(path, _context_file(path, body)) for path, body in files]
    text = head + "".join(piece for _, piece in pieces)
    parts = system_parts([{"type": "text", "text": text}], FAMILY)

    def tokens(piece: str) -> int:
        return estimate_message_tokens({"role": "system", "content": piece}, family=FAMILY)

    expected = [(path, tokens(piece)) for path, piece in pieces]
    if not pieces:
        expected = [("the prompt", tokens(head))]
    elif head.strip():
        expected.insert(0, ("the prompt, before the context files", tokens(head)))
    assert sorted((p.name, p.tokens) for p in parts) == sorted(expected)
    assert [p.tokens for p in parts] == sorted((p.tokens for p in parts), reverse=True)


def test_each_system_block_is_its_own_part_and_a_long_path_keeps_its_tail() -> None:
    long = "/root/.amplifier/cache/amplifier-foundation-0123456789abcdef/context/shared/base.md"
    blocks = [
        {"type": "text", "text": "You are careful. " * 40},
        {"type": "text", "text": _context_file(long, "Be brief. " * 10)},
    ]
    names = {p.name for p in system_parts(blocks, FAMILY)}
    assert names == {"block 1", "…/context/shared/base.md"}


def _recorded(tmp_path: Path) -> tuple[Path, list[dict[str, Any]], str]:
    tools = [_tool("delegate", 400), _tool("read_file", 20), _tool("bash", 60)]
    prompt = "You are an agent.\n" + _context_file("foundation:context/a.md", "Delegate. " * 300)
    prompt += _context_file("modes:context/b.md", "Mode. " * 50)
    directory = make_session(
        tmp_path / "s", tools=lambda _: tools, system=[{"type": "text", "text": prompt}]
    )
    return directory, tools, prompt


def test_the_report_breaks_the_tools_and_the_system_prompt_down(tmp_path: Path) -> None:
    directory, tools, _ = _recorded(tmp_path)
    last = run_json("replay", str(directory))["window_by_category"][-1]
    by_tool = [(t["name"], _alone(t)) for t in tools]
    assert [(p["name"], p["tokens"]) for p in last["tool_definitions"]] == sorted(
        by_tool, key=lambda p: -p[1]
    )
    assert [p["name"] for p in last["system_parts"]] == [
        "foundation:context/a.md",
        "modes:context/b.md",
        "the prompt, before the context files",
    ]
    text = (
        CliRunner().invoke(app, ["replay", "--full", str(directory)], env={"COLUMNS": "120"}).stdout
    )
    tools_table = text.split("tool definitions, per tool", 1)[1].split("system prompt, per", 1)[0]
    rows = [line.split() for line in tools_table.splitlines() if line.strip()]
    listed = [row[0] for row in rows if row and row[0] in {"delegate", "read_file", "bash"}]
    assert listed == ["delegate", "bash", "read_file"]  # largest first
    delegate = next(row for row in rows if row[0] == "delegate")
    share = _alone(tools[0]) / last["categories"]["tool definitions"]
    assert delegate[1:3] == [f"{_alone(tools[0]):,}", f"{share:.1%}"]
    assert "foundation:context/a.md" in text.split("system prompt, per part", 1)[1]


def test_a_transcript_without_payload_has_no_parts(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    last = run_json("replay", str(path), "--overhead", "500")["window_by_category"][-1]
    assert last["tool_definitions"] == [] == last["system_parts"]
    assert "per tool" not in run("replay", "--full", str(path)).stdout


@pytest.mark.skipif(not REAL_SESSION.is_dir(), reason="needs ../shared (the recorded session)")
def test_on_the_real_session_delegate_is_two_thirds_of_the_tools() -> None:
    last = run_json("replay", str(REAL_SESSION))["window_by_category"][-1]
    whole = last["categories"]["tool definitions"]
    first = last["tool_definitions"][0]
    assert first["name"] == "delegate" and 0.6 < first["tokens"] / whole < 0.7
    assert len(last["tool_definitions"]) == 16
    files = [p["name"] for p in last["system_parts"]]
    assert "foundation:context/agents/delegation-instructions.md" in files
    assert all(not re.match(r"^/root/", name) for name in files)
