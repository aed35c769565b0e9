"""json_text: the --json documents parse to what json.dumps gives, one list item per line."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple.replay.output.json_text import json_text

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers() | st.booleans(), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(VALUES, st.booleans())
def test_the_text_parses_to_what_json_dumps_gives(value: Any, ascii_only: bool) -> None:
    text = json_text(value, ensure_ascii=ascii_only)
    assert json.loads(text) == json.loads(json.dumps(value, ensure_ascii=ascii_only))
    if ascii_only:
        assert text.isascii()


RECORDS = st.lists(st.dictionaries(st.text(max_size=5), VALUES, max_size=3), max_size=4)


@given(st.dictionaries(st.text(max_size=5), RECORDS, max_size=3))
def test_each_record_of_a_list_is_one_line(document: dict[str, list[dict[str, Any]]]) -> None:
    lines = json_text(document).split("\n")
    records = [line.strip().rstrip(",") for line in lines if line.startswith("    ")]
    expected = [r for items in document.values() for r in items]
    assert [json.loads(r) for r in records] == json.loads(json.dumps(expected))


def test_objects_are_indented_and_unencodable_values_go_through_default() -> None:
    text = json_text({"summary": {"requests": 2}, "when": object()}, default=lambda _: "x")
    assert text.splitlines() == [
        "{",
        '  "summary": {',
        '    "requests": 2',
        "  },",
        '  "when": "x"',
        "}",
    ]
    assert json_text("é", ensure_ascii=False) == '"é"'
