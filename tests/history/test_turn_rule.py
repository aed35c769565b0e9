"""One reading of the turn rule (issue 28 §2), held against the provider oracle.

Which messages open the turn a provider reads as the current one is read by one function
(``_turn_rule.TurnReader``). Its answer is compared with the oracle's (``provider_rules``,
Anthropic 6) on generated views with merged prompts, hook reminders and system messages; the
floor, the decisions kept after a rewrite that deletes a prompt, and ``check_view`` are held
to it on whole sessions.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.history._turn_rule import TurnReader, part_of
from amplifier_module_context_simple.views._protection import (
    LadderPolicy,
    newest,
    prompts_and_opening,
    protected_positions,
    rest_of_turns,
    turn_opening,
)

from ..provider_rules import anthropic_violations, provider_violations, to_anthropic
from ..views.test_map_making import indexed

Msg = dict[str, Any]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- messages from a compact picture ----------------------------------------------------------


def _thinking(label: str) -> Msg:
    return {"type": "thinking", "thinking": f"About {label}.", "signature": f"sig-{label}"}


def build(picture: str, *, result_chars: int = 40) -> list[Msg]:
    """Messages from a picture such as ``H A*[c0,c1] T T A R H S``: ``H`` a prompt, ``R`` a hook
    reminder, ``S`` a system message, ``A`` an assistant answer (``*``: it opens with thinking,
    ``[ids]``: it makes those calls) and ``T`` the result of the next unanswered call."""
    messages: list[Msg] = []
    pending: list[str] = []
    for n, token in enumerate(picture.split()):
        if token == "H":
            messages.append({"role": "user", "content": f"prompt {n}"})
        elif token == "R":
            note = f"<system-reminder>note {n}</system-reminder>"
            messages.append({"role": "user", "content": note, "metadata": {"source": "hook"}})
        elif token == "S":
            messages.append({"role": "system", "content": f"system {n}"})
        elif token == "T":
            cid = pending.pop(0)
            body = f"R{n}|" + "x" * result_chars
            messages.append({"role": "tool", "tool_call_id": cid, "content": body})
        else:
            match = re.fullmatch(r"A(\*?)(?:\[([\w,]+)\])?", token)
            assert match, token
            content: list[Msg] = [_thinking(f"m{n}")] if match.group(1) else []
            content.append({"type": "text", "text": f"answer {n}"})
            message: Msg = {"role": "assistant", "content": content}
            if match.group(2):
                ids = match.group(2).split(",")
                message["tool_calls"] = [
                    {"id": i, "tool": "read", "arguments": {"n": n}} for i in ids
                ]
                pending += ids
            messages.append(message)
    return messages


# --- the reading, and the oracle's --------------------------------------------------------------


def read_opener(view: Sequence[Mapping[str, Any]]) -> int | None:
    reader = TurnReader()
    for index, message in enumerate(view):
        result = message.get("role") == "tool"
        reader.feed(
            index, part_of(message.get("role"), result=result, calls="tool_calls" in message)
        )
    return reader.active().opener


def oracle_opener(view: Sequence[Mapping[str, Any]]) -> int | None:
    """The view index that opens the final assistant turn as Anthropic 6 reads it."""
    request = to_anthropic(view)
    turns = request.messages
    plain = [
        t
        for t, turn in enumerate(turns)
        if turn["role"] == "user"
        and not any(b.get("type") == "tool_result" for b in turn["content"])
    ]
    start = plain[-1] + 1 if plain else 0
    first = next((t for t in range(start, len(turns)) if turns[t]["role"] == "assistant"), None)
    return None if first is None else request.origins[first][0]


@st.composite
def pictures(draw: st.DrawFn) -> str:
    """Well-paired conversations: prompts typed right after a result, reminders anywhere a
    user turn may stand, system messages, rounds with and without thinking."""
    tokens: list[str] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["H", "H", "R", "S", "A", "A*", "round", "round*"]))
        if kind.startswith("round"):
            calls = draw(st.integers(1, 2))
            ids = ",".join(f"c{len(tokens)}_{k}" for k in range(calls))
            tokens.append(("A*" if kind.endswith("*") else "A") + f"[{ids}]")
            tokens += ["T"] * calls
        else:
            tokens.append(kind)
    return " ".join(tokens)


@SETTINGS
@given(pictures())
def test_the_reading_finds_the_opener_the_oracle_checks(picture: str) -> None:
    view = build(picture)
    assert read_opener(view) == oracle_opener(view), picture


@SETTINGS
@given(pictures(), st.data())
def test_check_view_refuses_what_the_oracle_refuses_for_thinking(
    picture: str, data: st.DataObject
) -> None:
    """Any view of whole units (a call with its results) that Anthropic 6 refuses is reported
    by check_view, for a history a session with thinking on could have: every request that
    got an assistant message, with that message, was accepted (anthropic-6)."""
    history = build(picture)
    for p, m in enumerate(history):
        if m["role"] == "assistant":
            accepted = anthropic_violations(history[: p + 1], thinking=True)
            if any(v.rule == "anthropic-6" for v in accepted):
                return
    units: list[list[int]] = []
    for i, m in enumerate(history):
        if m.get("role") == "tool":
            units[-1].append(i)
        else:
            units.append([i])
    for _ in range(8):
        keep = data.draw(st.lists(st.booleans(), min_size=len(units), max_size=len(units)))
        view = [history[i] for k, unit in enumerate(units) if keep[k] for i in unit]
        if any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True)):
            assert check_view(view, history=history), keep


# --- the two failures of issue 28 §2 ------------------------------------------------------------


def test_each_role_plays_its_part() -> None:
    # The parts are the reader's vocabulary (``Part``): a new reader must be able to rely on
    # them, even where ``feed`` today treats an assistant making calls as "not plain".
    assert part_of("assistant", result=False, calls=True) == "calls"
    assert part_of("assistant", result=False, calls=False) == "assistant"
    assert part_of("tool", result=True, calls=False) == "result"
    assert part_of("user", result=False, calls=False) == "user"
    assert part_of("hook", result=False, calls=False) == "user"
    assert part_of("system", result=False, calls=False) == "lifted"


def test_check_view_reports_the_turn_a_merged_prompt_leaves_open() -> None:
    """``H0, A*, T, A, T, H1`` with H1 typed right after a result: the provider reads the turn
    from A*, so ``[H0, A, T, H1]`` opens it without thinking (anthropic-6)."""
    history = build("H A*[c1] T A[c2] T H")
    view = [history[0], history[3], history[4], history[5]]
    assert any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True))
    assert "the active turn does not open with the history's thinking assistant message" in (
        check_view(view, history=history)
    )
    assert check_view(history, history=history) == []


def test_a_trailing_reminder_is_the_user_turn_the_active_turn_starts_after() -> None:
    """``H R A* A R``: the provider reads the last reminder as the last user turn. A view that
    leaves it and the thinking answer out opens its active turn with ``A``: refused."""
    history = build("H R A* A R")
    view = [history[0], history[3]]
    assert any(v.rule == "anthropic-6" for v in anthropic_violations(view, thinking=True))
    assert "the active turn does not open with the history's thinking assistant message" in (
        check_view(view, history=history)
    )
    index = HistoryIndex(estimate_message_tokens)
    index.sync(history, None)
    assert turn_opening(index) == {3, 4}, "the floor keeps that user turn and what it follows"
    plain = HistoryIndex(estimate_message_tokens)
    plain.sync(build("H R A A R"), None)
    assert turn_opening(plain) == {3, 4}, "the next message may open with thinking: kept too"
    plain.sync(build("H R A A H"), None)
    assert turn_opening(plain) == set(), "thinking off; newest() pins the answer before H"
    plain.sync(build("H R A A R A"), None)
    assert turn_opening(plain) == set(), "thinking off, and the turn has opened"


async def _last_view_of(messages: list[Msg], **config: Any) -> tuple[list[Msg], list[Msg]]:
    manager = SimpleContextManager(**config)
    for message in messages:
        await manager.add_message(message)
    return await manager.get_messages_for_request(), await manager.get_messages()


def test_the_answer_before_the_opening_user_turn_stays() -> None:
    """``H c T H2 A R c* T A`` (H2 typed after the result; found by test_compaction): the
    reminder R is the user turn the active one starts after. Left out, the answer A before it
    let R merge into ``T, H2`` and the active turn open with ``c``, without thinking."""
    messages = build("H A[c0] T H A R A*[c4] T A", result_chars=6_000)
    view, history = asyncio.run(_last_view_of(messages, max_tokens=1_200, protected_recent=0.0))
    assert check_view(view, history=history) == []
    assert provider_violations(view, history=history, thinking=True) == []
    assert any(m is history[4] or m == history[4] for m in view)


async def _views_around_a_rewrite(picture: str, budget: int, delete: int, at: int) -> list[str]:
    """Views of a session asked for before every assistant message; before message ``at`` the
    store is re-read with message ``delete`` gone (fresh dicts, as a subclass re-reads it)."""
    messages = build(picture, result_chars=3_800)
    manager = SimpleContextManager()
    problems: list[str] = []
    for position, message in enumerate(messages):
        if message["role"] == "assistant" and position > 0:
            if position == at:
                fresh = copy.deepcopy(manager.messages)
                assert fresh[delete]["role"] == "user"
                del fresh[delete]
                manager.messages = fresh
            view = await manager.get_messages_for_request(token_budget=budget)
            history = await manager.get_messages()
            thinking = "*" in picture
            found = [
                *check_view(view, history=history),
                *(str(v) for v in provider_violations(view, history=history, thinking=thinking)),
            ]
            problems += [f"before {position}: {p}" for p in found]
        await manager.add_message(copy.deepcopy(message))
    return problems


def _rewrite_problems(picture: str, delete: int, at: int) -> list[str]:
    logging.disable(logging.WARNING)
    try:
        return asyncio.run(_views_around_a_rewrite(picture, 3_404, delete, at))
    finally:
        logging.disable(logging.NOTSET)


SEED_777 = (
    "H A*[c0] T A[c1,c2] T T A[c3] T A H A*[c4,c5] T T A[c6] T "
    "H A*[c7] T A[c8] T A[c9] T A[c10] T A"
)


def test_a_rewrite_that_deletes_a_prompt_shows_the_turn_it_now_opens() -> None:
    """test_provider_views, seed 777: the second prompt is deleted from the store; the active
    turn now opens with the first round, which an earlier escalation left out."""
    assert _rewrite_problems(SEED_777, delete=9, at=16) == []


SEED_1001 = "H A[c0] T A[c1] T A H A H A[c2] T A[c3,c4,c5] T T T A[c6] T A[c7,c8,c9] T T T A"


def test_a_rewrite_that_deletes_the_latest_prompt_shows_the_one_before() -> None:
    """test_provider_views, seed 1001: with the latest prompt gone, the one before it is the
    latest, and a view must not leave it out."""
    assert _rewrite_problems(SEED_1001, delete=8, at=17) == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["merged", "plain", "reminder"]), min_size=2, max_size=4),
    st.lists(st.integers(1, 3), min_size=4, max_size=4),
    st.sampled_from(["every", "first"]),
    st.integers(0, 3),
    st.floats(0.4, 1.0),
)
def test_views_around_rewrites_that_delete_prompts_are_accepted(
    turns: list[str], rounds: list[int], thinking: str, which: int, when: float
) -> None:
    """Generated sessions whose turns end with an answer, or run on into a prompt typed right
    after a result, with hook reminders before prompts; the store loses one prompt mid-session."""
    tokens: list[str] = []
    for t, kind in enumerate(turns):
        if kind == "reminder":
            tokens.append("R")
        tokens.append("H")
        for r in range(rounds[t]):
            star = "*" if thinking == "every" or r == 0 else ""
            tokens += [f"A{star}[c{t}_{r}]", "T"]
        if kind != "merged" or t == len(turns) - 1:
            tokens.append("A*" if thinking == "every" else "A")
    picture = " ".join(tokens)
    messages = build(picture)
    prompts = [i for i, m in enumerate(messages) if m["role"] == "user" and "metadata" not in m]
    answers = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    at = answers[min(len(answers) - 1, int(when * len(answers)))]
    earlier = [p for p in prompts if 0 < p < at]
    if not earlier:
        return
    delete = earlier[which % len(earlier)]
    assert _rewrite_problems(picture, delete, at) == [], picture


_DISPLAY_ROW: Msg = {
    "role": "assistant",
    "content": "Running the tests...",
    "metadata": {"amplifier_public_reference_only": True},
}
_ORPHAN: Msg = {"role": "tool", "tool_call_id": "never-made", "content": "lost"}
_ID_LESS: Msg = {"role": "tool", "content": "no call named"}


def _with(picture: str, position: int, message: Msg) -> list[Msg]:
    messages = build(picture)
    messages.insert(position, message)
    return messages


@pytest.mark.parametrize(
    ("history", "kept"),
    [
        # H typed right after the second round's result merges into that round's user turn;
        # the answer after it has no thinking to open a turn: the round stays.
        (build("H A*[c1] T A[c2] T H A"), {0, 1, 3}),
        (build("H A*[c1] T A[c2] T H A*"), {0, 1}),  # an answer with thinking needs none
        # What the provider never reads between the result and the prompt changes nothing.
        (build("H A*[c1] T A[c2] T S H A"), {0, 1, 3}),
        (_with("H A*[c1] T A[c2] T H A", 5, _DISPLAY_ROW), {0, 1, 3}),
        (_with("H A*[c1] T A[c2] T H A", 5, _ORPHAN), {0, 1, 3}),
        (_with("H A*[c1] T A[c2] T H A", 5, _ID_LESS), {0, 1, 3}),
        # A system message is no prompt, and a display row is no answer.
        (build("H A*[c1] T A[c2] T S A"), {0, 1}),
        (_with("H A*[c1] T A[c2] T H A*", 6, _DISPLAY_ROW), {0, 1}),
        # A prompt that merged into a round of an earlier turn is that turn's business.
        (build("H A*[c0] T H A H A*"), {4, 5, 6}),
    ],
    ids=[
        "merged",
        "thinking after",
        "system between",
        "display row between",
        "orphan between",
        "id-less result between",
        "system is no prompt",
        "display row is no answer",
        "earlier turn",
    ],
)
def test_the_rounds_a_prompt_of_the_active_turn_merges_into(
    history: list[Msg], kept: set[int]
) -> None:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(history, None)
    assert turn_opening(index) == kept


def test_the_message_the_next_prompt_will_follow() -> None:
    assert newest(indexed(build("H S"))) == 0, "system messages are passed over"
    assert newest(indexed(build("H A R"))) == 1, "so are hook reminders"
    assert newest(indexed(build("A"))) == 0
    assert newest(indexed(build("S R"))) is None
    assert newest(indexed(build("H A[c0] T"))) is None, "a result: its call is the floor's"


def test_the_rest_of_a_turn_runs_to_the_next_prompt() -> None:
    index = indexed(build("A[c0] T A H A[c1] T H"))
    assert rest_of_turns(index, [0]) == {0, 1, 2}
    assert rest_of_turns(index, [1, 4]) == {1, 2, 4, 5}


def test_the_latest_prompt_s_first_round_stays_when_it_opens_with_thinking() -> None:
    # H at 3 is typed right after a result: it continues the turn A[c0] opened without
    # thinking, yet A*[c1] is the round the person waits on. A system message between is
    # passed over.
    assert prompts_and_opening(indexed(build("H A[c0] T H A*[c1] T"))) == {0, 3, 4}
    assert prompts_and_opening(indexed(build("H A[c0] T H S A*[c1] T"))) == {0, 3, 5}
    assert prompts_and_opening(indexed(build("H A[c0] T H A[c1] T"))) == {0, 3}


def test_a_turn_opened_by_reminders_alone_keeps_the_last_of_them() -> None:
    assert turn_opening(indexed(build("R R A*"))) == {1, 2}


def test_the_latest_assistant_message_making_calls_is_the_floor_s() -> None:
    policy = LadderPolicy(protected_recent=0.0, protected_tool_results=0, truncate_chars=250)
    protection = protected_positions(indexed(build("H A H A[c0]")), policy, frozenset(), None)
    assert protection.floor == {0, 2, 3}
