"""What each left-out message gives the map (views/_map_reading.py ``LineReader``): a line per
call of a call message left out, a result on its call's line, and entries read again when the
history is rewritten."""

from __future__ import annotations

from typing import Any

from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._map_reading import LineReader

Msg = dict[str, Any]


def _calls(*calls: tuple[str, str, str]) -> Msg:
    return {
        "role": "assistant",
        "content": "Looking at ParserState first.",
        "tool_calls": [
            {"id": cid, "tool": tool, "arguments": {"path": path}} for cid, tool, path in calls
        ],
    }


def _result(cid: str, text: str) -> Msg:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _reader(history: list[Msg]) -> tuple[HistoryIndex, LineReader]:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(history, None)
    return index, LineReader(index)


HISTORY: list[Msg] = [
    {"role": "user", "content": "Why does TokenStream stall?"},
    _calls(("c1", "read_file", "src/lexer.py"), ("c2", "grep", "src/parser.py")),
    _result("c1", "class LexerBuffer: ..."),
    _result("c2", "ParserCursor found"),
    _result("ghost", "an answer to no call: OrphanThing"),
]


def test_a_call_message_left_out_gives_a_line_per_call_its_own_words_on_the_first() -> None:
    _, reader = _reader(HISTORY)
    assert reader.entries(1, True) == [
        ((1, "c1"), "read_file src/lexer.py", ("ParserState",)),
        ((1, "c2"), "grep src/parser.py", ()),
        ((1, "c1"), "read_file src/lexer.py", ()),
    ]
    # Shortened, not left out: its calls still show, so it is one line of its role.
    assert reader.entries(1, False) == [((1, "assistant"), "assistant", ("ParserState",))]


def test_a_result_stands_on_its_call_s_line_and_an_orphan_on_its_own() -> None:
    _, reader = _reader(HISTORY)
    assert reader.entries(3, True) == [((1, "c2"), "grep src/parser.py", ("ParserCursor",))]
    assert reader.entries(4, True) == [((4, "result"), "tool result", ("OrphanThing",))]


def test_other_messages_are_lines_of_their_role() -> None:
    _, reader = _reader(HISTORY)
    assert reader.entries(0, True) == [((0, "user"), "user", ("TokenStream",))]


def test_a_rewritten_history_is_read_again() -> None:
    index, reader = _reader(HISTORY)
    assert reader.entries(2, True)[0][1] == "read_file src/lexer.py"
    # The call is rewritten (another file read); the result after it is the same message.
    rewritten = [HISTORY[0], _calls(("c1", "read_file", "src/tokens.py"), ("c2", "grep", "x")),
                 *HISTORY[2:]]  # fmt: skip
    index.sync(rewritten, None)
    assert reader.entries(2, True)[0][1] == "read_file src/tokens.py"
