"""The estimate of the tool definitions a request carries (sizing/_tool_definitions.py)."""

from __future__ import annotations

import logging
from datetime import date

import pytest

from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.sizing._tool_definitions import (
    ToolDefinitions,
    estimate_tool_definitions,
)


def test_text_beyond_ascii_is_priced_as_the_characters_it_is() -> None:
    # A provider sends the definitions as UTF-8 JSON: a description in Japanese costs what
    # the text costs, not six ASCII characters of escape per character.
    text = "ファイルを読み込んで内容を返します。" * 20
    tool = {"name": "read", "description": text, "input_schema": {"type": "object"}}
    priced = estimate_tool_definitions([tool], None)
    alone = estimate_message_tokens({"role": "user", "content": text})
    assert alone <= priced < alone * 1.3


def test_a_value_json_cannot_write_is_priced_as_its_text() -> None:
    tool = {"name": "log", "description": "since", "input_schema": {"default": date(2026, 1, 2)}}
    with_text = {**tool, "input_schema": {"default": "2026-01-02"}}
    assert estimate_tool_definitions([tool], None) == estimate_tool_definitions([with_text], None)
    assert estimate_tool_definitions([], None) == 0


TOOLS = [
    {"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "grep", "description": "Search files.", "input_schema": {"type": "object"}},
]


def test_tools_are_read_from_a_list_a_callable_or_a_mapping_the_callable_returns() -> None:
    whole = estimate_tool_definitions(TOOLS, None)
    for source in (TOOLS, lambda: TOOLS, lambda: dict(zip(("r", "g"), TOOLS, strict=True))):
        definitions = ToolDefinitions()
        definitions.use(source)
        assert definitions.tokens(None) == whole
    for nothing in (None, lambda: None, lambda: "read grep", lambda: 42):
        definitions = ToolDefinitions()
        definitions.use(nothing)
        assert definitions.tokens(None) == 0


def test_a_source_that_cannot_list_its_tools_holds_back_nothing_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> list[object]:
        raise RuntimeError("coordinator gone")

    definitions = ToolDefinitions()
    definitions.use(broken)
    with caplog.at_level(logging.DEBUG, logger="amplifier_module_context_simple"):
        assert definitions.tokens(None) == 0
    (record,) = [r for r in caplog.records if "mounted tools" in r.getMessage()]
    assert record.exc_info and record.exc_info[0] is RuntimeError
