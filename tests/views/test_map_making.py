"""The map of what a view left out is ordered at its escalation and made when a view first
shows it (pure core): made late, it is the map that would have been made at once, and what
ranks its names first is read as of the escalation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.planning._map_maker import (
    MapMaker,
    _rough_tokens,  # pyright: ignore[reportPrivateUsage]
    held_to,
)
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._decisions import Decisions, LeftOutMap, NoticeFigures
from amplifier_module_context_simple.views._left_out_map import MapLine
from amplifier_module_context_simple.views._map_reading import RECENT_CALLS, PassedNames
from amplifier_module_context_simple.views._notice import notice_message

Msg = dict[str, Any]


def call(cid: str, **arguments: Any) -> Msg:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": cid, "tool": "read_file", "arguments": arguments}
    ]}  # fmt: skip


def result(cid: str, text: str) -> Msg:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def indexed(messages: list[Msg]) -> HistoryIndex:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    return index


def reads(count: int, start: int = 0) -> list[Msg]:
    """``count`` reads, call ``k`` passing ``src/file_k.py``."""
    messages: list[Msg] = []
    for k in range(start, start + count):
        messages += [call(f"c{k}", path=f"src/file_{k}.py"), result(f"c{k}", f"line {k}")]
    return messages


def test_passed_names_are_those_of_the_last_calls_before_the_length() -> None:
    messages = [{"role": "user", "content": "go"}, *reads(RECENT_CALLS + 2)]
    index = indexed(messages)
    passed = PassedNames(index)
    length = len(messages) - 2  # the last read comes after it
    before = passed.passed_before(length)
    assert before(f"src/file_{RECENT_CALLS}.py")  # the newest call before the length
    assert before("src/file_1.py")  # the oldest of the last RECENT_CALLS
    assert not before("src/file_0.py")  # older than those
    assert not before(f"src/file_{RECENT_CALLS + 1}.py")  # after the length
    assert passed.passed_before(len(messages))(f"src/file_{RECENT_CALLS + 1}.py")


def test_a_map_read_before_it_is_made_is_an_error() -> None:
    order = LeftOutMap(
        Decisions(removed=frozenset({1})), NoticeFigures(3, 1, 0, 0, False), (), bound=50,
        length=3,
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="before it was made"):
        _ = order.lines
    order.keep(("heading", "- line"))
    assert order.lines == ("heading", "- line")
    with pytest.raises(RuntimeError, match="made already"):
        order.recipe()


def _session() -> list[Msg]:
    names = " ".join(f"name_{k}" for k in range(12))
    return [
        {"role": "user", "content": "Read the config."},
        call("c0", path="conf/settings.toml"),
        result("c0", f"keys: {names} late_pick"),
        {"role": "assistant", "content": "Read it."},
        {"role": "user", "content": "Go on."},
    ]


def _order(maker: MapMaker, index: HistoryIndex) -> LeftOutMap:
    figures = NoticeFigures(len(index.facts), 2, 0, 0, False)
    order = maker.order(
        figures, Decisions(removed=frozenset({1, 2})), room=8_000, used=500, plain=60, shown=()
    )
    assert order is not None
    return order


def test_a_map_made_late_is_the_map_made_at_its_escalation() -> None:
    config = ContextConfig()
    messages = _session()
    at_once = MapMaker(config, indexed(messages))
    expected = at_once.lines(_order(at_once, at_once.index), lambda _: {})
    # ``late_pick`` is the last name the result held; only a call passing it would list it
    # among the first nine, and such a call comes after the escalation.
    assert expected and "late_pick" not in expected[1]
    index = indexed(messages)
    late = MapMaker(config, index)
    order = _order(late, index)
    grown = [*messages, call("c1", query="late_pick"), result("c1", "found")]
    index.sync(grown, None)
    assert late.lines(order, lambda _: {}) == expected
    # Ordered after that call, the map does list it first.
    again = late.lines(_order(late, index), lambda _: {})
    assert "late_pick" in again[1]


@pytest.mark.parametrize("verbosity", ["minimal", "normal", "verbose"])
def test_the_map_keeps_to_its_bound_at_the_verbosity_the_notice_is_sent_with(
    verbosity: str,
) -> None:
    # The estimate of a notice is not quite additive: the map's cost beside one verbosity's
    # fixed lines can be a token off its cost beside another's. Every bound is kept exactly.
    config = ContextConfig(compaction_notice_verbosity=verbosity)
    messages: list[Msg] = [{"role": "user", "content": "Read them all."}]
    for k in range(40):
        # Names in a script the estimate does not quite add up line by line.
        path = "資料データ" * (1 + k % 4) + f"_{k}"
        messages += [call(f"c{k}", path=path), result(f"c{k}", f"{path} 本文 {k}")]
    index = indexed(messages)
    maker = MapMaker(config, index)
    removed = frozenset(range(1, len(messages) - 2))
    figures = NoticeFigures(len(messages), len(removed), 0, 0, False)
    plain = estimate_message_tokens(notice_message(figures, verbosity))
    for bound in range(8, 400):
        order = LeftOutMap(
            Decisions(removed=removed), figures, (), bound=bound, length=len(messages)
        )
        lines = maker.lines(order, lambda _: {})
        mapped = notice_message(replace(figures, left_out_map=lines), verbosity)
        assert estimate_message_tokens(mapped) - plain <= bound
        assert len(lines) != 1, "a heading is never sent without a line under it"


def test_the_notice_s_own_lines_are_not_charged_to_the_map() -> None:
    # The notice states its figures in about a hundred tokens; a bound of 60 is the map's
    # alone, and a few lines fit it.
    messages = [{"role": "user", "content": "Read them all."}, *reads(40)]
    index = indexed(messages)
    maker = MapMaker(ContextConfig(), index)
    removed = frozenset(range(1, len(messages) - 2))
    figures = NoticeFigures(len(messages), len(removed), 0, 0, False)
    assert estimate_message_tokens(notice_message(figures, "normal")) > 60
    order = LeftOutMap(Decisions(removed=removed), figures, (), bound=60, length=len(messages))
    assert len(maker.lines(order, lambda _: {})) >= 2


# Paths and tool names the estimate counts differently at each verbosity's fixed lines: at a
# bound of 124, the map that fits beside the normal notice is a line too long for the minimal.
MIXED_SCRIPTS = [
    ("grep", "資料データxéabc数据é_0"), ("文件", "ファイルпуть_1"), ("read_file", "abcééabc数据_2"),
    ("文件", "ファイルпутьファイル_3"), ("grep", "путь_4"), ("文件", "数据ファイルxabcé数据_5"),
    ("文件", "xabc数据資料データпуть_6"), ("read_file", "xéxファイル_7"),
    ("文件", "abcファイル資料データ資料データ_8"), ("文件", "資料データx数据ファイル_9"),
    ("文件", "abc資料データabcabcabc資料データ_10"), ("read_file", "ファイル資料データéx_11"),
    ("read_file", "abcabcファイル資料データabc_12"), ("文件", "abcxabcxx_13"),
    ("grep", "xファイルxファイルé数据_14"), ("read_file", "éファイル数据数据xé_15"),
    ("read_file", "путьéé_16"), ("文件", "数据資料データabcファイルabcx_17"),
    ("read_file", "é資料データ_18"),
]  # fmt: skip


@pytest.mark.parametrize("verbosity", ["minimal", "normal", "verbose"])
def test_a_map_in_mixed_scripts_keeps_to_its_bound_at_every_verbosity(verbosity: str) -> None:
    messages: list[Msg] = [{"role": "user", "content": "Read them all."}]
    for k, (tool, path) in enumerate(MIXED_SCRIPTS):
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{k}", "tool": tool, "arguments": {"path": path}}
            ]},
            result(f"c{k}", f"{path} 本文 {k}"),
        ]  # fmt: skip
    index = indexed(messages)
    maker = MapMaker(ContextConfig(compaction_notice_verbosity=verbosity), index)
    removed = frozenset(range(1, len(messages) - 2))
    figures = NoticeFigures(len(messages), len(removed), 0, 0, True)
    plain = estimate_message_tokens(notice_message(figures, verbosity))
    for bound in range(100, 140):
        order = LeftOutMap(
            Decisions(removed=removed), figures, (), bound=bound, length=len(messages)
        )
        lines = maker.lines(order, lambda _: {})
        mapped = notice_message(replace(figures, left_out_map=lines), verbosity)
        assert estimate_message_tokens(mapped) - plain <= bound
        assert len(lines) >= 2


@given(
    weights=st.lists(st.integers(0, 30), max_size=8),
    extra=st.integers(0, 3),
    bound=st.integers(0, 120),
)
def test_held_to_keeps_the_longest_head_that_fits_and_never_a_heading_alone(
    weights: list[int], extra: int, bound: int
) -> None:
    lines = tuple(f"line {k}" for k in range(len(weights)))

    def cost(kept: tuple[str, ...]) -> int:
        # Grows with every line, and not quite additively (as an estimate of the whole).
        return sum(weights[: len(kept)]) + (extra if len(kept) % 2 else 0) + len(kept)

    held = held_to(bound, lines, cost)
    assert held == lines[: len(held)]
    if held:
        assert cost(held) <= bound
    if held != lines:
        assert len(held) != 1, "a heading is never kept alone"
        longer = lines[: max(2, len(held) + 1)]
        assert cost(longer) > bound, "a head one line longer would have fitted"


@given(st.text(min_size=0, max_size=60))
def test_a_name_is_measured_on_the_high_side_in_whole_tokens(name: str) -> None:
    # Names run two to four characters a token: two characters a token is the high side.
    rough = _rough_tokens(name)
    assert isinstance(rough, int)
    assert rough >= -(-len(name) // 2) and rough >= 1
    # No higher than that either: a map filled by an over-count lists fewer names than fit.
    assert rough == len(name) // 2 + 1


def test_no_map_is_ordered_without_room_for_one_or_anything_to_map() -> None:
    maker = MapMaker(ContextConfig(), indexed(_session()))
    figures = NoticeFigures(5, 2, 0, 0, False)
    left_out = Decisions(removed=frozenset({1, 2}))

    def order(decisions: Decisions, used: int) -> LeftOutMap | None:
        return maker.order(figures, decisions, room=8_000, used=used, plain=60, shown=())

    assert order(left_out, 8_000 - 60 - 1) is not None, "one token of room is room"
    assert order(left_out, 8_000 - 60) is None, "the view and the notice fill the room"
    assert order(Decisions(), 500) is None, "nothing left out, nothing to map"


@pytest.mark.parametrize(("names", "shown", "line"), [
    (("parse_args", "Config"), 2, "- read_file src/cli.py: parse_args Config"),
    (("parse_args", "Config"), 1, "- read_file src/cli.py: parse_args"),
    (("parse_args",), 0, "- read_file src/cli.py"),
    ((), 3, "- read_file src/cli.py"),
])  # fmt: skip
def test_a_map_line_lists_the_names_asked_for_and_no_colon_without_them(
    names: tuple[str, ...], shown: int, line: str
) -> None:
    assert MapLine(origin=3, source="read_file src/cli.py", names=names).text(shown) == line
