"""What each left-out message gives the map (views/_map_reading.py ``LineReader``): a line per
call of a call message left out, a result on its call's line, and entries read again when the
history is rewritten."""

from __future__ import annotations

from typing import Any

from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.views._map_reading import LineReader, PassedNames

from .test_left_out_map import result
from .test_map_making import indexed

Msg = dict[str, Any]


def _calls(*calls: tuple[str, str, str]) -> Msg:
    return {
        "role": "assistant",
        "content": "Looking at ParserState first.",
        "tool_calls": [
            {"id": cid, "tool": tool, "arguments": {"path": path}} for cid, tool, path in calls
        ],
    }


def _reader(history: list[Msg]) -> tuple[HistoryIndex, LineReader]:
    index = indexed(history)
    return index, LineReader(index)


HISTORY: list[Msg] = [
    {"role": "user", "content": "Why does TokenStream stall?"},
    _calls(("c1", "read_file", "src/lexer.py"), ("c2", "grep", "src/parser.py")),
    result("c1", "class LexerBuffer: ..."),
    result("c2", "ParserCursor found"),
    result("ghost", "an answer to no call: OrphanThing"),
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


# --- the labels and names a line is made of ---------------------------------------------------


def _call_line(tool: str, arguments: object) -> tuple[str, tuple[str, ...]]:
    """The label and the argument names of a left-out call made with ``arguments``."""
    message = {"role": "assistant", "content": "",
               "tool_calls": [{"id": "c", "tool": tool, "arguments": arguments}]}  # fmt: skip
    _, reader = _reader([{"role": "user", "content": "go"}, message])
    (_, label, _), (_, _, names) = reader.entries(1, True)
    return label, names


def test_a_call_s_label_is_its_tool_and_what_it_was_called_on_on_one_line() -> None:
    assert _call_line("bash", {"command": "  ls   -la\n src/  "})[0] == "bash ls -la src/"
    assert _call_line("todo", {"n": 3})[0] == "todo", "no text argument: the tool alone"
    exact = "x" * 80
    assert _call_line("echo", {"text": exact})[0] == f"echo {exact}"
    assert _call_line("echo", {"text": exact + "y"})[0] == f"echo {'x' * 79}…"


def test_what_a_call_was_about_is_its_first_text_argument_that_holds_a_name() -> None:
    assert _call_line("edit", {"mode": "view", "path": "src/a.py"})[0] == "edit src/a.py"
    assert _call_line("edit", {"mode": "view", "n": 3})[0] == "edit view"
    assert _call_line("edit", {"n": 3, "blank": "  "})[0] == "edit"
    assert _call_line("edit", '{"path": "src/b.py"}')[0] == "edit src/b.py", "JSON text"
    assert _call_line("edit", "not json at all")[0] == "edit not json at all"
    assert _call_line("edit", "")[0] == "edit"
    assert _call_line("edit", ["src/c.py"])[0] == "edit"


def test_a_call_passes_the_names_in_its_short_arguments_nested_ones_too() -> None:
    arguments = {
        "paths": ["src/a.py", {"also": "src/b.py"}],
        "body": "x" * 400 + " BigName",  # a file's body, read where it is shown
        "limit": "y" * 391 + " EdgeName",  # 400 characters exactly: short enough
    }
    label, names = _call_line("multi", arguments)
    assert label == f"multi {'x' * 79}…", "the first text that holds a name: the body"
    assert names == ("src/a.py", "src/b.py", "EdgeName")


def test_a_result_s_line_is_the_call_it_answers_or_its_first() -> None:
    call = _calls(("c1", "read_file", "src/a.py"), ("c2", "grep", "src/b.py"))
    _, reader = _reader([{"role": "user", "content": "go"}, call, result("c2", "FoundMatch")])
    assert reader.entries(2, True) == [((1, "c2"), "grep src/b.py", ("FoundMatch",))]


def test_the_names_the_latest_calls_passed_up_to_a_length() -> None:
    history = [
        _calls(("c0", "read_file", "src/first.py")),
        result("c0", "ok"),
        {"role": "user", "content": "now the second"},
        _calls(("c1", "read_file", "src/second.py")),
    ]
    index, _ = _reader(history)
    passed = PassedNames(index)
    assert passed.passed_before(1)("src/first.py"), "a call at the very start"
    before_second = passed.passed_before(3)
    assert before_second("src/first.py") and not before_second("src/second.py")
    assert passed.passed_before(4)("src/second.py"), "the latest call before the length"
