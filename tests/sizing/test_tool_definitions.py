"""The estimate of the tool definitions a request carries (sizing/_tool_definitions.py)."""

from __future__ import annotations

from datetime import date

from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions


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
