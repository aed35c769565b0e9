"""The in-place notice never moves between escalations (issue 35, item 4), at any budget.

Where the notice stands is decided once, at the escalation that shows it, from the history as
it was then; later requests put it in the same place however the active turn or the call
still being executed moves on. ``tests/notice_moves.py`` replays a session (a view before
every assistant message) and counts the pairs of consecutive requests with no escalation
between them that the notice alone broke; a resumed manager is asked at every request too.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.views._decisions import CompactionStats, Decisions
from amplifier_module_context_simple.views._render import notice_boundary

from ..notice_moves import BUDGETS, Replay, is_notice, read_transcript, replay
from ..provider_rules import provider_violations
from ..test_provider_views import PROPERTY_SETTINGS, filler

CODING_SESSION = (
    Path(__file__).resolve().parents[3] / "shared" / "sessions" / "coding-session-thinking.jsonl"
)

Msg = dict[str, Any]


def _thinking(label: str) -> Msg:
    return {"type": "thinking", "thinking": f"Let me weigh {label}.", "signature": f"sig-{label}"}


def _assistant(label: str, *, text: str | None, calls: list[str], thinking: bool) -> Msg:
    content: list[Msg] = [_thinking(label)] if thinking else []
    if text is not None:
        content.append({"type": "text", "text": text})
    message: Msg = {"role": "assistant", "content": content}
    if calls:
        content += [
            {"type": "tool_call", "id": c, "name": "read_file", "input": {"path": f"src/{c}.py"}}
            for c in calls
        ]
        message["tool_calls"] = [
            {"id": c, "tool": "read_file", "arguments": {"path": f"src/{c}.py"}} for c in calls
        ]
    return message


def coding_session(choices: Any) -> list[Msg]:
    """A coding session with signed thinking: prompts, answers, tool rounds of 1-3 parallel
    calls, an answer that the same turn's next round follows (the notice must not stand after
    it inside the active turn), hook reminders. ``choices`` draws each choice: a
    ``random.Random`` or hypothesis' ``data``-backed drawer (``_Draw``)."""
    messages: list[Msg] = [{"role": "system", "content": "You are a careful coding agent."}]
    serial = 0
    every = choices.flag("thinking in every round")
    for turn in range(choices.integer("turns", 2, 6)):
        messages.append({"role": "user", "content": f"H{turn}: fix failing test number {turn}."})
        rounds = choices.integer("rounds", 0, 5)
        for r in range(rounds):
            thinking = every or r == 0
            if choices.flag("an answer before the round"):
                # Said, then done in the same turn: the round follows an answer.
                label = f"t{turn}r{r}a"
                messages.append(_assistant(label, text="I will look.", calls=[], thinking=thinking))
                thinking = every
            calls = [f"call_{serial + k}" for k in range(choices.integer("calls", 1, 3))]
            serial += len(calls)
            messages.append(_assistant(f"t{turn}r{r}", text=None, calls=calls, thinking=thinking))
            for c in calls:
                size = choices.integer("result tokens", 40, 2_500)
                messages.append({"role": "tool", "tool_call_id": c, "content": filler(c, size)})
            if choices.flag("a hook reminder"):
                messages.append(
                    {
                        "role": "user",
                        "content": f"<system-reminder>round {r}</system-reminder>",
                        "metadata": {"source": "hook"},
                    }
                )
        answer = _assistant(f"t{turn}z", text=f"Test {turn} passes.", calls=[], thinking=True)
        if rounds and not every:
            answer["content"] = answer["content"][1:]
        messages.append(answer)
    return messages


class _Seeded:
    """Draws from a seeded ``random.Random`` (a flag is true one time in three)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def flag(self, label: str) -> bool:
        return self.rng.random() < 1 / 3

    def integer(self, label: str, low: int, high: int) -> int:
        return self.rng.randint(low, high)


class _Draw:
    """Draws through hypothesis, so a failing session shrinks."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def flag(self, label: str) -> bool:
        return self.data.draw(st.booleans(), label=label)

    def integer(self, label: str, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high), label=label)


def run(messages: list[Msg], budget: int, **config: Any) -> Replay:
    logging.disable(logging.WARNING)
    try:
        return asyncio.run(replay(messages, budget, resume=True, **config))
    finally:
        logging.disable(logging.NOTSET)


def assert_still(found: Replay, budget: int) -> None:
    assert found.moved == [], f"at {budget:,}: the notice moved at requests {found.moved}"
    assert found.broken == [], f"at {budget:,}: requests {found.broken} broke the prefix"
    assert found.resumed_differ == [], f"at {budget:,}: resumed views differ {found.resumed_differ}"


@pytest.mark.parametrize("seed", [7, 14, 19])  # seeds whose notice once joined a turn's prompt
def test_a_generated_session_with_signed_thinking_keeps_its_notice_still(seed: int) -> None:
    session = coding_session(_Seeded(seed))
    escalated = waited = 0
    for budget in BUDGETS:
        found = run(session, budget)
        assert_still(found, budget)
        escalated += found.escalations > 0
        waited += found.pairs > 0 and found.escalations > 0
    assert escalated >= 3 and waited >= 3, "the session must escalate and then wait"


@pytest.mark.skipif(not CODING_SESSION.is_file(), reason="../shared/sessions is not available")
@pytest.mark.parametrize("budget", BUDGETS)
def test_the_shared_coding_session_keeps_its_notice_still(budget: int) -> None:
    assert_still(run(read_transcript(CODING_SESSION), budget), budget)


@PROPERTY_SETTINGS
@given(st.data(), st.integers(2_000, 30_000))
def test_generated_sessions_never_move_the_notice_between_escalations(
    data: st.DataObject, budget: int
) -> None:
    session = coding_session(_Draw(data))
    assert_still(run(session, budget), budget)


def _dumps(view: list[Any]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in view]


# ---------------------------------------------------------------- the rule after an answer


def _said_then_done(rounds: int) -> list[Msg]:
    """Two turns; the second opens with an answer ("I will look.") and then works through
    ``rounds`` tool rounds without thinking of their own."""
    history: list[Msg] = [
        {"role": "user", "content": "H0: fix the parser."},
        _assistant("a0", text="Fixed.", calls=[], thinking=True),
        {"role": "user", "content": "H1: now the lexer."},
        _assistant("a1", text="I will look.", calls=[], thinking=True),
    ]
    for k in range(rounds):
        history.append(_assistant(f"c{k}", text=None, calls=[f"call_{k}"], thinking=False))
        history.append(
            {"role": "tool", "tool_call_id": f"call_{k}", "content": filler(f"call_{k}", 800)}
        )
    return history


async def _filled(history: list[Msg], budget: int, **config: Any) -> SimpleContextManager:
    """A manager that ran ``history`` as an orchestrator does: a request before every
    assistant message."""
    manager = SimpleContextManager(**config)
    for message in history:
        if message["role"] == "assistant":
            await manager.get_messages_for_request(token_budget=budget)
        await manager.add_message(copy.deepcopy(message))
    return manager


async def test_a_notice_after_an_answer_joins_the_prompt_that_opens_the_active_turn() -> None:
    """The escalation leaves out the round right after the answer that opens the active turn:
    standing there, the notice would be a user turn of its own inside the active turn (the
    provider would read the turn as opening after it, with a round without thinking). It
    joins the prompt that opens the turn, and stays there when the next turn starts."""
    history = _said_then_done(8)
    manager = await _filled(history, 6_000)
    view = await manager.get_messages_for_request(token_budget=6_000)
    assert 4 in manager.decisions.removed, "the test needs the round after the answer left out"
    [at] = [i for i, m in enumerate(view) if is_notice(m)]
    assert view[at - 1]["content"] == history[1]["content"]  # after the earlier turn's answer
    assert view[at + 1]["content"] == "H1: now the lexer."  # joining the active turn's prompt
    assert provider_violations(view, history=history, thinking=True) == []
    # The turn ends and the next one starts: no escalation, and the notice stays put.
    decisions = manager.decisions
    for message in (
        _assistant("a2", text="The lexer is fixed.", calls=[], thinking=True),
        {"role": "user", "content": "H2: and the printer."},
    ):
        await manager.add_message(message)
    later = await manager.get_messages_for_request(token_budget=6_000)
    assert manager.decisions is decisions, "the test needs a request between escalations"
    assert _dumps(later[: len(view)]) == _dumps(view)
    # A resumed manager places it where the running session did.
    resumed = SimpleContextManager()
    await resumed.set_messages(copy.deepcopy(await manager.get_messages()))
    assert _dumps(await resumed.get_messages_for_request(token_budget=6_000)) == _dumps(later)


# ---------------------------------------------------------------- what placing it costs


@pytest.mark.parametrize("seed", [14, 19])
async def test_a_request_between_escalations_renders_nothing_to_place_its_notice(
    seed: int,
) -> None:
    """The notice's place is rendered once per escalation: a later request renders only the
    messages that are new since the previous one (``Planner.rendered_messages`` counts every
    history message the planner rendered, for the view and for the notice's place)."""
    manager = SimpleContextManager()
    decisions = manager.decisions
    rendered, added, between = manager.planner.rendered_messages, 0, 0
    placing = manager.planner.composer.rendered  # of those, the ones rendered to place it
    for message in coding_session(_Seeded(seed)):
        if message["role"] == "assistant":
            view = await manager.get_messages_for_request(token_budget=8_000)
            now = manager.planner.rendered_messages
            if manager.decisions is decisions and any(map(is_notice, view)):
                between += 1
                assert now - rendered <= added, f"{now - rendered} rendered for {added} new"
            elif manager.decisions is not decisions:
                # An escalation renders the body before the notice's new place, once.
                assert manager.planner.composer.rendered > placing
            assert manager.planner.composer.rendered >= placing
            decisions, rendered, added = manager.decisions, now, 0
            placing = manager.planner.composer.rendered
        await manager.add_message(copy.deepcopy(message))
        added += 1
    assert between >= 5, "the test needs requests between escalations that show a notice"


# ---------------------------------------------------------------- the boundary it starts from


def _latest(*, removed: tuple[int, ...] = (), truncated: tuple[int, ...] = ()) -> CompactionStats:
    return CompactionStats(
        before_tokens=0, after_tokens=0, before_messages=0, after_messages=0,
        messages_removed=len(removed), messages_truncated=len(truncated),
        user_messages_stubbed=0, system_messages_preserved=0, strategy_level=3, budget=0,
        target_tokens=0, protected_recent=0.3, protected_tool_results=5,
        removed_positions=removed, truncated_positions=truncated,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["removed", "truncated"])
def test_the_notice_stands_at_the_first_position_the_latest_escalation_reduced(kind: str) -> None:
    """Not at the first position any escalation reduced: an earlier escalation's reductions
    stand before it, and the stretch between them is the same as in the previous request."""
    earlier = {1, 2, 3}
    latest = (9, 12)
    if kind == "removed":
        decisions = Decisions(removed=frozenset({*earlier, *latest}))
        stats = _latest(removed=latest)
    else:
        decisions = Decisions(
            removed=frozenset(earlier), truncated=MappingProxyType(dict.fromkeys(latest, 500))
        )
        stats = _latest(truncated=latest)
    assert notice_boundary(decisions, stats, 20) == 9
    # A position of the latest escalation shown again (a reminder put back) is passed over.
    assert notice_boundary(decisions.without(frozenset({9})), stats, 20) == 12
    # With none of its positions reduced any more, the first reduced one is where it goes.
    assert notice_boundary(decisions.without(frozenset(latest)), stats, 20) == 1
    assert notice_boundary(decisions, None, 20) == 1


# ---------------------------------------------------------------- after a rewrite


async def test_after_a_rewrite_of_the_last_message_the_notice_stays_before_the_same_one() -> None:
    """A rewrite drops what was decided about where the notices stand; the next request places
    the notice afresh, at the first position the latest escalation reduced, so it still comes
    before the message the latest notice came before (not before the first one any escalation
    reduced, where an earlier notice stood)."""
    history = coding_session(_Seeded(3))
    manager = await _filled(history, 12_000)
    view = await manager.get_messages_for_request(token_budget=12_000)
    notices = [i for i, m in enumerate(view) if is_notice(m)]
    assert len(notices) == 2, "the test needs an earlier notice standing before the latest"
    decisions = manager.decisions
    last = copy.deepcopy(manager.messages[-1])
    last["content"] = [*last["content"], {"type": "text", "text": "(edited by the host)"}]
    manager.messages = [*manager.messages[:-1], last]
    later = await manager.get_messages_for_request(token_budget=12_000)
    assert manager.decisions is decisions, "the test needs no escalation after the rewrite"
    [at] = [i for i, m in enumerate(later) if is_notice(m)]
    assert _dumps(later[at + 1 :][:4]) == _dumps(view[notices[-1] + 1 :][:4])
    assert provider_violations(later, history=manager.messages, thinking=True) == []


async def test_a_second_escalation_in_one_turn_leaves_the_notice_at_its_prompt_as_it_was() -> None:
    """Both escalations leave out rounds right after the answer that opens the active turn,
    so both notices would join the same prompt. The one standing stays, saying what it said
    (the view up to the prompt after it stays the same bytes), and the second adds none."""
    history = _said_then_done(8)
    manager = await _filled(history[:-2], 6_000)
    view = await manager.get_messages_for_request(token_budget=6_000)
    [at] = [i for i, m in enumerate(view) if is_notice(m)]
    decisions = manager.decisions
    for message in history[-2:]:
        await manager.add_message(copy.deepcopy(message))
    later = await manager.get_messages_for_request(token_budget=6_000)
    assert manager.decisions is not decisions, "the test needs a second escalation"
    assert manager.decisions.removed > decisions.removed
    assert [i for i, m in enumerate(later) if is_notice(m)] == [at]
    assert _dumps(later[: at + 2]) == _dumps(view[: at + 2])
    assert later[at + 1]["content"] == "H1: now the lexer."
    assert provider_violations(later, history=history, thinking=True) == []
