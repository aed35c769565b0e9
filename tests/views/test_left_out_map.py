"""The map of what a compacted view left out (issue 35): the names a model needs to find the
left-out work again, inside the budget, sticky between escalations, rebuilt by a resume."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.views._left_out_map import MAP_HEADING, build_map, map_lines_of
from amplifier_module_context_simple.views._map_reading import LineReader, message_names
from amplifier_module_context_simple.views._render import NOTICE_SOURCE, text_of
from amplifier_module_context_simple.vocabulary._names import names_in

Msg = dict[str, Any]


def is_notice(message: Msg) -> bool:
    return (message.get("metadata") or {}).get("source") == NOTICE_SOURCE


def the_map(view: list[Msg]) -> list[str]:
    notices = [m for m in view if is_notice(m)]
    return map_lines_of(text_of(notices[0])) if notices else []


def call(cid: str, tool: str, **arguments: Any) -> Msg:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": cid, "tool": tool, "arguments": arguments}
    ]}  # fmt: skip


def result(cid: str, text: str) -> Msg:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def reading_session(files: int = 14, lines: int = 60) -> list[Msg]:
    """A person's task, then one read of a file after another, each result naming the
    file's own identifiers: what a coding agent's early turns look like."""
    messages: list[Msg] = [{"role": "user", "content": "Fix the failing test in the repo."}]
    for n in range(files):
        body = "\n".join(f"def helper_{n}_{k}(value): return value  # filler text" for k in
                         range(lines))  # fmt: skip
        messages.append(call(f"c{n}", "read_file", path=f"src/pkg/module_{n}.py"))
        messages.append(result(f"c{n}", f"class ModuleConfig{n}:\n{body}"))
    return messages


Fed = tuple[SimpleContextManager, list[list[Msg]]]


async def fed(messages: list[Msg], budget: int, **config: Any) -> Fed:
    """A manager fed ``messages`` one by one, a view asked before every assistant message and
    once at the end; the manager and its views."""
    manager = SimpleContextManager(**config)
    views: list[list[Msg]] = []
    for message in messages:
        if message["role"] == "assistant":
            views.append(await manager.get_messages_for_request(token_budget=budget))
        await manager.add_message(message)
    views.append(await manager.get_messages_for_request(token_budget=budget))
    return manager, views


def map_of(manager: SimpleContextManager, bound: int = 100_000) -> tuple[str, ...]:
    """The map of what the manager's decisions leave out, to ``bound`` characters."""
    index = manager.planner.index
    return build_map(
        index, manager.decisions, shown=[], reader=LineReader(index), bound=bound, measure=len,
        length=len(index.facts),
    )  # fmt: skip


async def test_a_left_out_read_keeps_its_path_and_names_newest_first() -> None:
    manager, views = await fed(reading_session(), 8_000)
    view = views[-1]
    lines = the_map(view)
    assert lines, "the view left reads out: it maps them"
    removed = manager.decisions.removed
    assert removed
    left_out = [n for n in range(14) if 2 * n + 1 in removed]
    # Each left-out read is a line: the tool and the path it read, then the class it held
    # (unless a shortened result still shows it).
    for n in left_out[-2:]:
        line = next(x for x in lines if f"src/pkg/module_{n}.py" in x)
        assert line.startswith(f"- read_file src/pkg/module_{n}.py:")
        assert line.count(f"module_{n}.py") == 1, "the label's path is not listed again"
        if 2 * n + 2 in removed:
            assert f"ModuleConfig{n}" in line
    # Newest first: the lines follow the left-out reads from the latest back.
    order = [next(n for n in left_out if f"module_{n}.py" in line) for line in lines
             if "module_" in line]  # fmt: skip
    assert order == sorted(order, reverse=True)
    notice = next(m for m in view if is_notice(m))
    assert MAP_HEADING in text_of(notice)


async def test_a_name_the_view_still_shows_is_not_mapped_again() -> None:
    messages = reading_session()
    # The latest prompt names the first file's class: it is in context, so the map skips it.
    messages.append({"role": "user", "content": "Look again at ModuleConfig0 please."})
    manager, views = await fed(messages, 8_000)
    assert 1 in manager.decisions.removed
    shown = set[str]()
    for m in views[-1]:
        if m["role"] in ("tool", "user") and not is_notice(m):
            shown |= set(names_in(text_of(m)))
    mapped = set[str]().union(*(names_in(line) for line in the_map(views[-1])))
    assert "ModuleConfig0" in shown
    assert "ModuleConfig0" not in mapped
    assert mapped and not (mapped - {"read_file"}) & shown


async def test_a_large_map_share_takes_only_what_the_view_leaves() -> None:
    # Nine tenths of the budget is more than the escalated view leaves: the map gets only the
    # rest. It never makes the view smaller: the same messages are left out as with no map.
    messages = reading_session(lines=20)
    mapped, views = await fed(messages, 3_000, compaction_map_share=0.9)
    unmapped = (await fed(messages, 3_000, compaction_map_share=0.0))[0]
    assert the_map(views[-1]), "the view maps what it left out"
    assert mapped.decisions.removed == unmapped.decisions.removed


@pytest.mark.parametrize("share", [0.0, 0.01, 0.05, 0.2])
async def test_the_map_stays_within_its_share_of_the_budget(share: float) -> None:
    budget = 8_000
    view = (await fed(reading_session(), budget, compaction_map_share=share))[1][-1]
    notice = next(m for m in view if is_notice(m))
    lines = the_map(view)
    mapped = "\n" + "\n".join([MAP_HEADING, *lines]) if lines else ""
    bare = {**notice, "content": notice["content"].replace(mapped, "")}
    assert estimate_message_tokens(notice) - estimate_message_tokens(bare) <= share * budget
    if share == 0.0:
        assert not lines and MAP_HEADING not in notice["content"]
    if share >= 0.05:
        assert len(lines) >= 3, "a twentieth of the budget holds several lines"
    assert sum(estimate_message_tokens(m) for m in view) <= budget


def test_a_bad_map_share_is_refused_naming_the_key() -> None:
    values: list[Any] = [-0.1, 1.5, "0.05", True]
    for value in values:
        with pytest.raises(ValueError, match="compaction_map_share"):
            SimpleContextManager(compaction_map_share=value)


async def test_a_resumed_manager_sends_the_same_map() -> None:
    messages = reading_session(files=20)
    manager, views = await fed(messages, 8_000)
    resumed = SimpleContextManager()
    await resumed.set_messages(await manager.get_messages())
    again = await resumed.get_messages_for_request(token_budget=8_000)
    assert the_map(again) and the_map(again) == the_map(views[-1])
    assert again == views[-1]


# ------------------------------------------------------------------ the property

PATHS = ("src/app.py", "src/db/models.py", "tests/test_app.py", "docs/guide.md", "setup.cfg")


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Msg], int]:
    budget = draw(st.sampled_from([2_000, 4_000, 8_000, 12_000]))
    messages: list[Msg] = [{"role": "user", "content": "Start: read the code and fix it."}]
    serial = 0
    for turn in range(draw(st.integers(1, 4))):
        if turn:
            messages.append({"role": "user", "content": f"Next, look at item_{turn} please."})
        for _ in range(draw(st.integers(1, 5))):
            calls = draw(st.integers(1, 2))
            ids = [f"call_{serial + k}" for k in range(calls)]
            serial += calls
            paths = [draw(st.sampled_from(PATHS)) for _ in ids]
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": cid, "tool": draw(st.sampled_from(["read_file", "grep", "bash"])),
                 "arguments": {"path": path}} for cid, path in zip(ids, paths, strict=True)
            ]})  # fmt: skip
            for cid, path in zip(ids, paths, strict=True):
                size = draw(st.integers(1, budget // 200))
                names = " ".join(f"name_{serial}_{k} {path}" for k in range(size))
                messages.append(result(cid, f"{path}:\n{names}\n" + "filler line\n" * size))
        messages.append({"role": "assistant", "content": f"Done with turn {turn}."})
    return messages, budget


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_the_map_is_sticky_fits_the_budget_and_survives_a_resume(
    session: tuple[list[Msg], int],
) -> None:
    messages, budget = session

    async def run() -> None:
        manager = SimpleContextManager()
        previous: tuple[int, list[Msg]] | None = None
        for message in messages:
            if message["role"] == "assistant":
                view = await manager.get_messages_for_request(token_budget=budget)
                escalations = manager.decisions.escalations
                # Inside the budget, the notice and its map counted.
                assert sum(estimate_message_tokens(m) for m in view) <= budget
                notices = [m for m in view if is_notice(m)]
                if previous is not None and previous[0] == escalations:
                    # No escalation since the last request: the notice reads the same.
                    assert notices == previous[1]
                previous = (escalations, notices)
                # The map is a function of the decisions: a manager given this history plans
                # the same escalations and sends the same bytes.
                resumed = SimpleContextManager()
                await resumed.set_messages(await manager.get_messages())
                assert await resumed.get_messages_for_request(token_budget=budget) == view
            await manager.add_message(message)

    asyncio.run(run())


async def test_a_call_is_named_by_the_argument_that_holds_a_name() -> None:
    # An editor call's first argument is its command ("view"); the path it viewed names it.
    messages: list[Msg] = [{"role": "user", "content": "Look at the code."}]
    for n in range(14):
        path = f"/work/repo/src/pkg/part_{n}.py"
        messages.append(call(f"c{n}", "str_replace_editor", command="view", path=path))
        body = "\n".join(f"src/pkg/part_{n}.py:{k}: def step_{n}_{k}(): pass" for k in range(60))
        messages.append(result(f"c{n}", body))
    manager, views = await fed(messages, 8_000)
    lines = the_map(views[-1])
    assert lines
    for line in lines:
        assert line.startswith("- str_replace_editor /work/repo/src/pkg/part_"), line
        # The result's "src/pkg/part_N.py" is an ending of the label's path: not listed again.
        label, _, names = line.partition(": ")
        assert label.removeprefix("- str_replace_editor /work/repo/") not in names.split()
    assert manager.decisions.removed


def test_map_lines_are_read_from_the_first_heading_even_if_a_line_repeats_it() -> None:
    # A tool may be named anything, the heading's words included: the map starts at the
    # notice's own heading, the first one.
    lines = ["- read_file: src/app.py", f"- {MAP_HEADING}: tests/test_app.py"]
    text = "Some of this conversation was left out.\n" + MAP_HEADING + "\n" + "\n".join(lines)
    assert map_lines_of(text + "\n\nAsk again for what you need.") == lines
    assert map_lines_of("no map here") == []


async def test_a_map_built_to_a_bound_takes_no_more_and_grows_with_it() -> None:
    # Measured in characters: each line is counted as its call, then name by name (the
    # colon that opens a line's names is the one character not counted).
    manager, _ = await fed(reading_session(), 3_000)
    index, decisions = manager.planner.index, manager.decisions
    assert len(decisions.removed) > 5
    reader = LineReader(index)
    previous: tuple[str, ...] = ()
    for bound in (0, 40, 70, 120, 200, 400, 800, 1_600, 100_000):
        lines = build_map(
            index, decisions, shown=[], reader=reader, bound=bound, measure=len,
            length=len(index.facts),
        )  # fmt: skip
        assert sum(map(len, lines)) <= bound + len(lines)
        assert len(" ".join(lines)) >= len(" ".join(previous)), "a larger bound maps no less"
        previous = lines
    assert previous[0] == MAP_HEADING and len(previous) > 5
    # The whole map, to the character, fits a bound of exactly its size, and not one less.
    exact = sum(map(len, previous)) - sum(": " in line for line in previous[1:])
    for bound, whole in ((exact, True), (exact - 1, False)):
        lines = build_map(
            index, decisions, shown=[], reader=reader, bound=bound, measure=len,
            length=len(index.facts),
        )  # fmt: skip
        assert (lines == previous) is whole


def _text_with(length: int, placed: dict[int, str]) -> str:
    """``length`` characters of filler that holds no name, with each name starting at its
    offset."""
    chars = list(". " * (length // 2) + "." * (length % 2))
    for offset, name in placed.items():
        chars[offset - 1 : offset + len(name) + 1] = f" {name} "
    assert len(chars) == length
    return "".join(chars)


def test_a_long_message_s_names_are_read_from_its_first_three_thousand_and_last_thousand() -> None:
    # A long message: its head (three quarters of 4,000 characters) and its tail (a quarter).
    head_end, past_head, tail_start = "head_end_name", "past_head_name", "tail_start_name"
    length = 9_000
    text = _text_with(
        length,
        {3_000 - len(head_end): head_end, 3_200: past_head, length - 1_000: tail_start},
    )
    names = message_names({"role": "tool", "tool_call_id": "c", "content": text})
    assert head_end in names and tail_start in names
    assert past_head not in names
    # Exactly 4,000 characters is not long: it is read whole, a name across 3,000 too.
    across = "across_the_cut_name"
    whole = _text_with(4_000, {2_990: across})
    assert across in message_names({"role": "tool", "tool_call_id": "c", "content": whole})


async def test_a_left_out_call_lists_the_names_its_arguments_passed() -> None:
    # Each search passes a symbol besides its path: a left-out search's line names the
    # symbol (the path is its label already).
    messages: list[Msg] = [{"role": "user", "content": "Find where the options are parsed."}]
    for n in range(14):
        messages.append(
            call(f"s{n}", "grep", path=f"src/pkg/module_{n}.py", symbol=f"parse_opt_{n}")
        )
        messages.append(result(f"s{n}", "no match here\n" * 150))
    manager, views = await fed(messages, 3_000)
    lines = the_map(views[-1])
    left_out = [n for n in range(14) if 1 + 2 * n in manager.decisions.removed]
    assert left_out, "some searches are left out"
    # (Lines get their names a round at a time while the map has room: not every one does.)
    assert any(f"parse_opt_{n}" in line for n in left_out for line in lines)


async def test_a_line_names_paths_first_then_file_names_then_identifiers() -> None:
    # Each result names an identifier, a file name and a path, in that reading order; the
    # map lists what an agent most often passes on first.
    messages: list[Msg] = [{"role": "user", "content": "Find the settings loader."}]
    for n in range(14):
        messages.append(call(f"c{n}", "grep", pattern=f"loader{n}"))
        filler = "\n".join(f"match {k}: nothing to see here, just filler text" for k in range(40))
        text = f"SettingsLoader{n} reads config_{n}.yaml from src/app/settings_{n}.py\n{filler}"
        messages.append(result(f"c{n}", text))
    manager, _ = await fed(messages, 3_000)
    lines = map_of(manager)
    checked = 0
    for n in range(14):
        line = next((x for x in lines if x.startswith(f"- grep loader{n}:")), None)
        if line is None:
            continue
        names = (f"src/app/settings_{n}.py", f"config_{n}.yaml", f"SettingsLoader{n}")
        order = [line.index(name) for name in names]
        assert order == sorted(order), line
        checked += 1
    assert checked >= 3


async def test_a_call_repeated_with_nothing_new_to_name_is_said_once() -> None:
    # Every file is read twice, the same text each time: the older read adds no name, so its
    # line would only repeat the newer one's call.
    messages: list[Msg] = [{"role": "user", "content": "Fix the failing test in the repo."}]
    for n in range(7):
        body = "\n".join(f"def helper_{n}_{k}(value): return value  # filler" for k in range(60))
        for again in range(2):
            messages.append(call(f"c{n}_{again}", "read_file", path=f"src/pkg/module_{n}.py"))
            messages.append(result(f"c{n}_{again}", f"class ModuleConfig{n}:\n{body}"))
    manager, _ = await fed(messages, 3_000)
    lines = map_of(manager)
    calls = [line.split(": ")[0] for line in lines[1:]]
    assert len(calls) >= 3
    assert len(calls) == len(set(calls)), calls


async def test_a_map_whose_calls_alone_fill_the_bound_exactly_lists_them() -> None:
    manager, _ = await fed(reading_session(), 3_000)
    first_call = map_of(manager)[1].split(": ")[0]
    exact = len(MAP_HEADING) + len(first_call)
    assert map_of(manager, exact) == (MAP_HEADING, first_call)
    assert map_of(manager, exact - 1) == ()


async def test_with_room_for_everything_every_left_out_read_has_its_line() -> None:
    messages = reading_session()
    for n in range(14):  # each call message says what it looks for
        messages[2 * n + 1]["content"] = f"Checking docs/notes_{n}.md next."
    manager, _ = await fed(messages, 3_000)
    lines = map_of(manager)
    # Calls at 1, 3, 5, ...: each one left out has a line with its own words, the oldest too.
    read = [n for n in range(14) if 2 * n + 1 in manager.decisions.removed]
    assert 0 in read and len(read) > 5
    for n in read:
        line = next(x for x in lines if x.startswith(f"- read_file src/pkg/module_{n}.py"))
        assert f"docs/notes_{n}.md" in line


async def test_a_shorter_name_of_an_older_line_takes_room_a_newer_line_s_name_cannot() -> None:
    messages: list[Msg] = [{"role": "user", "content": "Fix the failing test in the repo."}]
    for n in range(14):
        name = f"short_{n}" if n % 2 else f"AnExceptionallyLongIdentifierName{n}"
        filler = "\n".join(f"line {k}: nothing but filler text here" for k in range(50))
        messages.append(call(f"c{n}", "read_file", path=f"src/pkg/module_{n}.py"))
        messages.append(result(f"c{n}", f"{name}\n{filler}"))
    manager, _ = await fed(messages, 3_000)
    lines = map_of(manager)[1:]
    newer, older = next(
        (a, b) for a, b in itertools.pairwise(lines) if "AnExceptionally" in a and "short_" in b
    )
    newer_call, older_call = newer.split(": ")[0], older.split(": ")[0]
    older_name = older.split(": ")[1].split(" ")[0]
    # Room for every call up to these two and the older line's first name, not the newer's.
    calls = [line.split(": ")[0] for line in lines[: lines.index(older) + 1]]
    bound = len(MAP_HEADING) + sum(map(len, calls)) + len(" " + older_name)
    built = map_of(manager, bound)
    assert newer_call in built
    assert f"{older_call}: {older_name}" in built
